"""`tidegate backfill MODEL --partitions all` on a cursor model: everything past the committed
cursor up to the watermark, in batches of at most N source rows, with the stop (Ctrl-C), resume and
stop-loss of any backfill; resume continues the recorded interval, and is refused once another
run has moved the cursor (those rows are processed already)."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from tests.cursors.cursor_kit import MODEL, CursorProject, cursor_project
from tests.faults.ledger import live_attempts, runs_with_status
from tests.kit import continued_until_exit, spawn, state_dump, until_stopped
from tidegate.crash import ENVIRONMENT_VARIABLE, SIGNAL_VARIABLE

pytestmark = [pytest.mark.duckdb, pytest.mark.crash]

START = ("backfill", MODEL, "--partitions", "all", "--batch-size", "4", "--rate", "600/min")


@pytest.fixture
def events(tmp_path: Path) -> CursorProject:
    found = cursor_project(tmp_path / "proj")
    found.insert(12)
    return found


def paused_after_first_batch(events: CursorProject) -> tuple[str, int]:
    """A backfill process stopped (SIGSTOP) right after its first batch's checkpoint."""
    process = spawn(
        *START,
        "--project",
        events.root,
        env={ENVIRONMENT_VARIABLE: "after_ledger:1", SIGNAL_VARIABLE: "SIGSTOP"},
    )
    until_stopped(process.pid)
    [run_id] = runs_with_status(events.root, "running")
    assert live_attempts(events.root) == []
    return run_id, process.pid


def test_a_stopped_cursor_backfill_resumes_its_recorded_interval(events: CursorProject) -> None:
    run_id, pid = paused_after_first_batch(events)
    os.kill(pid, signal.SIGINT)  # Ctrl-C: handled as soon as it continues
    assert continued_until_exit(pid) == 130  # stopped after the batch in flight
    assert events.target_ids() == [1, 2, 3, 4]
    assert runs_with_status(events.root, "stopped") == [run_id]
    events.insert(3)  # 13..15 arrive after the plan was recorded
    resumed = events.tidegate("backfill", "resume", run_id, "--json")
    assert resumed.exit_code == 0, resumed.stderr
    assert events.target_ids() == list(range(1, 13))  # the recorded interval (0, 12]
    shown = events.tidegate("show", "run", run_id, "--json").json()
    assert [a["partition"] for a in shown["attempts"] if a["state"] == "published"] == [
        "(0,4]",
        "(4,8]",
        "(8,12]",
    ]
    assert shown["plan"]["selection"] == [[0, 12]]
    events.run()  # the next run continues past it
    assert events.target_ids() == events.source_ids() == list(range(1, 16))


def test_resume_is_refused_once_another_run_moved_the_cursor(events: CursorProject) -> None:
    run_id, pid = paused_after_first_batch(events)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    events.run()  # reconciles the dead backfill and processes (4, 12]
    assert events.target_ids() == list(range(1, 13))
    before = state_dump(events.root)
    refused = events.tidegate("backfill", "resume", run_id)
    assert refused.exit_code == 3
    assert refused.stderr.strip().splitlines() == [
        f"error: the cursor of {MODEL} is at 12, not where this backfill stopped (4): another "
        "run processed past it; start a new backfill"
    ]
    assert state_dump(events.root) == before
    assert events.target_ids() == events.source_ids()


def test_a_check_failure_halts_the_cursor_backfill_where_it_fired(tmp_path: Path) -> None:
    events = cursor_project(
        tmp_path / "proj", extra='\n[[checks]]\ntype = "expression"\nexpression = "net < 20"\n'
    )
    events.insert(12)  # net = 2.5 * id: ids 8.. fail
    halted = events.tidegate(*START, "--json")
    assert halted.exit_code == 1
    [run_id] = runs_with_status(events.root, "failed")
    shown = events.tidegate("show", "run", run_id, "--json").json()
    assert shown["trigger"].startswith("check_failure at (4,8]")
    assert events.target_ids() == [1, 2, 3, 4]
    assert events.tidegate("status", "--json").json()["models"][0]["cursor"]["committed"] == "4"


def test_a_cursor_backfills_progress_counts_its_batches_as_it_finds_them(
    events: CursorProject,
) -> None:
    """How many batches a cursor interval holds is known once its rows are read: the progress
    counts the partitions published, with no total to reach."""
    done = events.tidegate(*START)
    assert done.exit_code == 0, done.stderr
    lines = [line.split(": ", 1)[1] for line in done.stdout.splitlines() if "partitions, " in line]
    assert lines, done.stdout
    assert all(re.match(r"[1-3] partitions, ", line) for line in lines), lines
    assert "succeeded; 3 published, 0 failed" in done.stdout


def test_a_cursor_backfill_takes_all_and_one_batch_at_a_time(events: CursorProject) -> None:
    for args, message in (
        (("--partitions", "(0,4]"), "backfill it with --partitions all"),
        (("--partitions", "all", "--max-concurrency", "2"), "--max-concurrency 1"),
    ):
        refused = events.tidegate("backfill", MODEL, *args)
        assert refused.exit_code == 2
        assert message in refused.stderr


def test_a_dry_run_shows_the_interval_and_its_batches_and_writes_nothing(
    events: CursorProject,
) -> None:
    before = state_dump(events.root)
    shown = events.tidegate(*START, "--dry-run", "--json")
    assert shown.exit_code == 0, shown.stderr
    plan = shown.json()
    assert (plan["ranges"], plan["batches"], plan["batch_size"]) == (["(0,12]"], 3, 4)
    assert plan["first_batches"] == ["(0,4]", "(4,8]", "(8,12]"]
    assert plan["source_rows"] == {"events": 12}
    assert state_dump(events.root) == before
    human = events.tidegate(*START, "--dry-run")
    assert human.exit_code == 0, human.stderr
    assert "partitions   3 in 3 batch(es) of up to 4: (0,12]" in human.stdout
    assert "reads        12 rows of source events" in human.stdout
