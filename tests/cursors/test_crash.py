"""SIGKILL between write and checkpoint, at every crash point of the partition protocol, then
run again (with more rows arrived meanwhile): no row lost, none duplicated. The warehouse's
commit markers, written in the publish's transaction, settle the ledger (a partition published
by the dead process counts as committed; one it never published is planned again), so the
committed cursor never passes rows that were not written, nor falls behind rows that were."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.cursors.cursor_kit import MODEL, CursorProject, cursor_project
from tests.kit import run_process
from tidegate.crash import CRASH_POINTS, ENVIRONMENT_VARIABLE

# the interval that counts as committed after the second batch's process was killed there
COMMITTED_AFTER = {
    "after_intent": 4,
    "after_stage": 4,
    "after_audit": 4,
    "before_publish": 4,
    "after_publish": 8,
    "after_ledger": 8,
}


def crash_then_resume(events: CursorProject, point: str) -> None:
    events.insert(12)
    crashed = run_process(
        "run", MODEL, "--project", events.root, env={ENVIRONMENT_VARIABLE: f"{point}:2"}
    )
    assert crashed.exit_code == -signal.SIGKILL, (crashed.exit_code, crashed.stderr)
    events.insert(5)
    resumed = events.run()
    assert resumed["recovered"]["runs_interrupted"], resumed
    committed = COMMITTED_AFTER[point]
    first = next(p for p in resumed["partitions"] if p["state"] == "published")
    assert first["partition"].startswith(f"({committed},")
    assert events.target_ids() == events.source_ids() == list(range(1, 18))


@pytest.mark.crash
@pytest.mark.duckdb
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_kill_at_each_crash_point_then_run_again_duckdb(point: str, tmp_path: Path) -> None:
    events = cursor_project(tmp_path / "proj", extra="cursor_batch_rows = 4\n")
    crash_then_resume(events, point)


@pytest.mark.crash
@pytest.mark.postgres
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_kill_at_each_crash_point_then_run_again_postgres(
    point: str, tmp_path: Path, dsn: str
) -> None:
    events = cursor_project(tmp_path / "proj", dsn, extra="cursor_batch_rows = 4\n")
    crash_then_resume(events, point)
