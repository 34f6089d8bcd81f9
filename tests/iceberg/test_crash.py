"""Exactly once into Iceberg tables: kill -9 a real `tidegate run` of a project publishing into
Iceberg tables at the points around its publish, read main from outside (pyiceberg alone) before
anything resumes, then resume with the same command and compare with a clean run.

Before the resume, main holds whole partitions only: the days published before the kill, and the
killed day either entirely (its main moved) or not at all; a publish killed with its branch
written leaves that branch, which no reader follows. After the resume: the table, the per-partition
checksums and the markers in main's snapshots are a clean run's, and no `tidegate-*` branch is
left."""

from __future__ import annotations

import json
import signal
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.faults.ledger import (
    assert_ledger_matches_markers,
    live_attempts,
    oracle_between,
    published_checksums,
)
from tests.iceberg.kit import NAMESPACE, iceberg_project, outside_catalog
from tests.kit import assert_exactly_once, run_process, tidegate
from tidegate.crash import ENVIRONMENT_VARIABLE

FIRST, LAST = date(2025, 1, 1), date(2025, 1, 5)
RANGE = f"{FIRST}..{LAST}"
MODEL = "daily_revenue"
COLUMNS = ("order_date", "status", "order_count", "gross_revenue", "net_revenue")
KILLED_DAY = FIRST + timedelta(days=2)  # the third partition: TIDEGATE_CRASH_AT=<point>:3

# Per point: whether the killed day's publish reached main (the resume then finds its marker and
# records it published; otherwise it records the attempt failed and publishes the day anew),
# and whether the dead process left its branch behind.
# tests/faults/test_crash_coverage.py counts these points as kill-tested.
EXPECTED: dict[str, tuple[bool, bool]] = {
    "before_publish": (False, False),
    "iceberg_branch_written": (False, True),
    "after_publish": (True, False),
}
KILL_TESTED_POINTS = tuple(EXPECTED)


# what an outside Iceberg reader sees (pyiceberg only) --------------------------------------


def main_rows(project: Path) -> list[tuple[Any, ...]]:
    """The model's rows on main, as (order_date, status, count, gross, net), sorted."""
    with outside_catalog(project) as catalog:
        table = catalog.load_table((NAMESPACE, MODEL))
        rows = table.scan(selected_fields=COLUMNS).to_arrow().to_pylist()
    return sorted(tuple(row[c] for c in COLUMNS) for row in rows)


def branches(project: Path) -> list[str]:
    """Every ref of every table in the project's namespace other than main, as table@ref."""
    found: list[str] = []
    with outside_catalog(project) as catalog:
        for identifier in catalog.list_tables(NAMESPACE):
            table = catalog.load_table(identifier)
            found += [f"{identifier[-1]}@{ref}" for ref in table.refs() if ref != "main"]
    return sorted(found)


def main_markers(
    project: Path, folder: str = "lake", namespace: str = NAMESPACE
) -> list[tuple[Any, ...]]:
    """The markers named by main's snapshots (a branch's are not published), as
    (partition_start, attempt_id, run_id, version_id, checksum, published_at)."""
    found: list[tuple[Any, ...]] = []
    with outside_catalog(project, folder) as catalog:
        table = catalog.load_table((namespace, MODEL))
        snapshot = table.current_snapshot()
        while snapshot is not None:
            text = (snapshot.summary.additional_properties if snapshot.summary else {}).get(
                "tidegate.markers"
            )
            for group in json.loads(text or "[]"):
                model, _, run, version, at = group["shared"]
                assert model == MODEL
                for attempt, start, _, checksum in group["partitions"]:
                    found.append((start, attempt, run, version, checksum, at))
            parent = snapshot.parent_snapshot_id
            snapshot = None if parent is None else table.snapshot_by_id(parent)
    return found


def oracle(project: Path, days: set[date]) -> list[tuple[Any, ...]]:
    """The independent GROUP BY over the source orders, for these days."""
    return sorted(row for row in oracle_between(project, FIRST, LAST) if row[0] in days)


def days_between(first: date, last: date) -> set[date]:
    return {first + timedelta(days=i) for i in range((last - first).days + 1)}


# the tests ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[int, tuple[int, str]], Any]:
    """An uninterrupted run of the same range: its per-partition (rows, checksum) in the
    ledger, and its table on main."""
    project = iceberg_project(tmp_path_factory.mktemp("clean") / "proj")
    result = tidegate("run", MODEL, "--partition", RANGE, "--project", project)
    assert result.exit_code == 0, result.stderr
    checksums = published_checksums(project, MODEL)
    assert len(checksums) == 5
    rows = main_rows(project)
    assert rows == oracle(project, days_between(FIRST, LAST))
    return checksums, rows


@pytest.mark.crash
@pytest.mark.parametrize("point", KILL_TESTED_POINTS)
def test_a_killed_iceberg_publish_leaves_whole_partitions_and_resumes_to_a_clean_run(
    tmp_path: Path, point: str, clean: tuple[dict[int, tuple[int, str]], Any]
) -> None:
    committed, branch_left = EXPECTED[point]
    project = iceberg_project(tmp_path / "proj")
    command = ("run", MODEL, "--partition", RANGE, "--project", project)

    crashed = run_process(*command, env={ENVIRONMENT_VARIABLE: f"{point}:3"}, timeout=90)
    assert crashed.exit_code == -signal.SIGKILL, (crashed.exit_code, crashed.stderr)

    # before anything resumes, an outside reader sees whole partitions on main only: the two
    # days published before the kill, and the killed day entirely or not at all
    published = days_between(FIRST, KILLED_DAY if committed else KILLED_DAY - timedelta(days=1))
    on_main = main_rows(project)
    assert {row[0] for row in on_main} == published
    assert on_main == oracle(project, published)
    assert {m[0] for m in main_markers(project)} == {_epoch(d) for d in published}
    # the ledger recorded the first two; the killed day's attempt is left pending
    assert set(published_checksums(project, MODEL)) == {
        _epoch(d) for d in days_between(FIRST, KILLED_DAY - timedelta(days=1))
    }
    left = branches(project)
    if branch_left:
        [leftover] = left
        assert leftover.startswith(f"{MODEL}@tidegate-"), leftover
    else:
        assert left == []
    [(pending, _, _)] = live_attempts(project)

    resumed = run_process(*command, "--json", timeout=90)
    assert resumed.exit_code == 0, resumed.stderr
    document = resumed.json()
    assert document["status"] == "succeeded"
    recovered = document["recovered"]
    assert recovered["published"] == ([pending] if committed else [])
    assert recovered["failed"] == ([] if committed else [pending])

    checksums, rows = clean
    final = main_rows(project)
    assert final == rows
    assert_exactly_once(final, oracle(project, days_between(FIRST, LAST)))
    assert published_checksums(project, MODEL) == checksums
    assert assert_ledger_matches_markers(project, MODEL, main_markers(project)) == 5
    assert live_attempts(project) == []
    assert branches(project) == []


def _epoch(day: date) -> int:
    """A day partition's start as the markers and the ledger name it (seconds since 1970)."""
    return (day - date(1970, 1, 1)).days * 86400
