"""Every crash point in the source is registered, and every registered one has a kill test."""

from __future__ import annotations

import ast

from tests.faults.test_crash_points import KILL_TESTED_POINTS as PROTOCOL_POINTS
from tests.iceberg.test_crash import KILL_TESTED_POINTS as ICEBERG_POINTS
from tests.kit import REPO
from tidegate.crash import EVERY_POINT

# the points some test kills a real process at: the partition protocol's on every engine, and
# the Iceberg publish's (with the protocol points around it) on a project with Iceberg tables
KILL_TESTED_POINTS = PROTOCOL_POINTS + ICEBERG_POINTS

SOURCE = REPO / "src" / "tidegate"


def crash_point_calls() -> tuple[set[str], list[str]]:
    """Names passed to crash_point("...") anywhere under src/tidegate, and calls whose
    argument is not a string literal (which no scan could check)."""
    names: set[str] = set()
    opaque: list[str] = []
    for path in sorted(SOURCE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called != "crash_point":
                continue
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
            else:
                opaque.append(f"{path.relative_to(SOURCE)}:{node.lineno}")
    return names, opaque


def test_the_scan_sees_the_source_tree() -> None:
    assert (SOURCE / "execution" / "executor.py").is_file()
    called, _ = crash_point_calls()
    assert called, "the scan found no crash_point call at all"


def test_every_crash_point_in_the_source_is_registered_and_kill_tested() -> None:
    called, opaque = crash_point_calls()
    assert opaque == [], f"crash_point called with a non-literal name at {opaque}"
    assert called == set(EVERY_POINT), (
        f"called but not registered: {sorted(called - set(EVERY_POINT))}; "
        f"registered but never called: {sorted(set(EVERY_POINT) - called)}"
    )
    untested = set(EVERY_POINT) - set(KILL_TESTED_POINTS)
    assert not untested, f"crash points without a kill test: {sorted(untested)}"
    for tested in (PROTOCOL_POINTS, ICEBERG_POINTS):
        assert len(tested) == len(set(tested))
