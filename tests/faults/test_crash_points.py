"""G1 exactly once: kill -9 at every named crash point, resume, and compare with a clean run.

Each case runs a real `tidegate run` over five days with TIDEGATE_CRASH_AT=<point>:3, so the
process is SIGKILLed on the third partition, then resumes with the same command and checks that
the warehouse, the ledger and the warehouse commit markers all tell the same, clean story.
"""

from __future__ import annotations

import signal
from datetime import date
from pathlib import Path

import pytest

from tests.faults.ledger import (
    assert_ledger_matches_markers,
    live_attempts,
    oracle_between,
    published_checksums,
    runs_with_status,
)
from tests.kit import (
    assert_exactly_once,
    assert_no_staging,
    example_project,
    published_daily_revenue,
    run_process,
    tidegate,
)
from tidegate.crash import ENVIRONMENT_VARIABLE

FIRST, LAST = date(2025, 1, 1), date(2025, 1, 5)
RANGE = f"{FIRST}..{LAST}"
MODEL = "daily_revenue"

# What the resuming writer must conclude about the attempt the dead process left behind:
# "published" when the warehouse holds its commit marker (the publish committed, the ledger
# missed it), "failed" when it never published, None when the ledger already recorded the
# outcome (nothing is left pending, so there is nothing to reconcile).
# Every crash point must be listed here: tests/faults/test_crash_coverage.py enforces it.
EXPECTED_RECOVERY: dict[str, str | None] = {
    "after_intent": "failed",
    "after_stage": "failed",
    "after_audit": "failed",
    "before_publish": "failed",
    "after_publish": "published",
    "after_ledger": None,
}
KILL_TESTED_POINTS = tuple(EXPECTED_RECOVERY)


@pytest.fixture(scope="module")
def clean_checksums(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[int, str]]:
    """Per-partition (rows, checksum) of an uninterrupted run of the same range."""
    clean = example_project(tmp_path_factory.mktemp("clean") / "proj")
    result = tidegate("run", MODEL, "--partition", RANGE, "--project", clean)
    assert result.exit_code == 0, result.stderr
    checksums = published_checksums(clean, MODEL)
    assert len(checksums) == 5
    return checksums


@pytest.mark.crash
@pytest.mark.parametrize("point", KILL_TESTED_POINTS)
def test_kill_at_crash_point_then_resume_is_exactly_once(
    point: str, project: Path, clean_checksums: dict[int, tuple[int, str]]
) -> None:
    command = ("run", MODEL, "--partition", RANGE, "--project", project)

    crashed = run_process(*command, env={ENVIRONMENT_VARIABLE: f"{point}:3"}, timeout=60)
    assert crashed.exit_code == -signal.SIGKILL, (crashed.exit_code, crashed.stderr)

    # what the dead process left: its run still "running", at most one attempt mid-protocol
    [crashed_run] = runs_with_status(project, "running")
    left_pending = live_attempts(project)
    if EXPECTED_RECOVERY[point] is None:
        assert left_pending == []
    else:
        assert len(left_pending) == 1, left_pending
        assert left_pending[0][1] == crashed_run
    # two partitions were published before the kill, the third never fully recorded
    assert len(published_checksums(project, MODEL)) == (3 if point == "after_ledger" else 2)

    resumed = run_process(*command, "--json", timeout=60)
    assert resumed.exit_code == 0, resumed.stderr
    document = resumed.json()
    assert document["status"] == "succeeded"
    assert document["published"] == 5

    # reconciliation touched exactly the attempt left pending, and concluded from the markers
    recovered = document["recovered"]
    expected = EXPECTED_RECOVERY[point]
    pending_ids = [a[0] for a in left_pending]
    assert recovered["published"] == (pending_ids if expected == "published" else [])
    assert recovered["failed"] == (pending_ids if expected == "failed" else [])
    assert recovered["runs_interrupted"] == [crashed_run]

    # the table: the oracle for those five days, each row exactly once, no staging left
    oracle = oracle_between(project, FIRST, LAST)
    assert {row[0] for row in oracle} == {date(2025, 1, d) for d in range(1, 6)}
    assert_exactly_once(published_daily_revenue(project), oracle)
    assert_no_staging(project)

    # the ledger: the same per-partition checksums as a clean run, agreeing with the markers
    assert published_checksums(project, MODEL) == clean_checksums
    assert assert_ledger_matches_markers(project, MODEL) == 5
    assert live_attempts(project) == []

    shown = tidegate("show", "run", crashed_run, "--project", project, "--json")
    assert shown.exit_code == 0, shown.stderr
    assert shown.json()["status"] == "interrupted"
    states = {a["attempt_id"]: a["state"] for a in shown.json()["attempts"]}
    assert len(states) == 3
    if expected is not None:
        assert states[pending_ids[0]] == expected
    assert sorted(states.values()) == sorted(["published", "published", expected or "published"])
