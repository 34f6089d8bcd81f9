"""`tidegate backfill stop RUN_ID` from another process lets in-flight batches finish and ends
the run with exit 5; `backfill resume RUN_ID` continues from the first partition not yet
published, with the plan recorded with the run (its parameters and its version), even after a
new version of the model was deployed in between.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from tests.faults.backfill_kit import (
    MODEL,
    attempt_states,
    days,
    edit_model,
    listed_backfills,
    make_slow,
    marker_days,
    published_count,
    published_days,
    running,
    show_run,
)
from tests.faults.ledger import (
    assert_ledger_matches_markers,
    ledger_rows,
    live_attempts,
    oracle_between,
    wait_until,
)
from tests.kit import (
    assert_exactly_once,
    assert_no_staging,
    published_daily_revenue,
    run_process,
    run_process_events,
    state_dump,
    tidegate,
)

FIRST, LAST = date(2025, 1, 1), date(2025, 3, 31)
DAYS = days(FIRST, LAST)
RATE = 600  # recorded with the plan; never binds for 90 batches
# Each staged batch first scans this many generated rows (a few hundredths of a second), so the
# 90 one-day batches keep the backfill running well past the time a `stop` process needs.
SLOW_ROWS = 10_000_000
TIMEOUT = 60


def _start(project: Path, *extra: str) -> tuple[str, ...]:
    return (
        "backfill",
        MODEL,
        "--partitions",
        f"{FIRST}..{LAST}",
        "--batch-size",
        "1",
        *extra,
        "--project",
        str(project),
    )


def _running_run_id(project: Path) -> str:
    [run] = listed_backfills(project)
    assert run["status"] == "running", run
    return str(run["run_id"])


@pytest.mark.crash
def test_stop_then_resume_continues_the_recorded_plan_and_version(project: Path) -> None:
    original = make_slow(project, SLOW_ROWS)

    with running(*_start(project, "--rate", f"{RATE}/min", "--json")) as backfill:
        wait_until("the first published partition", lambda: published_count(project), TIMEOUT)
        run_id = _running_run_id(project)
        stop = run_process("backfill", "stop", run_id, "--project", project, timeout=TIMEOUT)
        assert stop.exit_code == 0, stop.stderr
        assert stop.stdout.strip() == f"{run_id}: stop requested; in-flight batches finish first"
        result = backfill.finish(TIMEOUT)
    assert result.exit_code == 5, (result.exit_code, result.stderr)
    assert result.stderr.splitlines() == [f"error: backfill {run_id} stopped on request; resumable"]
    assert result.json()["status"] == "stopped"

    shown = show_run(project, run_id)
    assert shown["status"] == "stopped", shown["reason"]
    assert shown["stop_requested_at"] is not None
    plan = shown["plan"]
    assert (plan["version_id"], plan["batch_size"], plan["rate_per_minute"]) == (original, 1, RATE)

    # it stopped part-way, after a prefix of the range: nothing after the last published day
    # was published, or even started (the batch in flight when asked finished and published)
    published = published_days(project)
    assert 1 <= len(published) < len(DAYS), published
    assert published == DAYS[: len(published)]
    assert published_days(project, run_id) == published
    assert attempt_states(project, run_id) == [(d, "published") for d in published]
    assert marker_days(project) == published
    assert_exactly_once(
        published_daily_revenue(project), oracle_between(project, FIRST, published[-1])
    )
    assert live_attempts(project) == []

    # a new version of the model is built and deployed before the resume
    newer = edit_model(project, "AND order_ts < $end", "AND order_ts < $end AND 1 = 1")
    assert newer != original

    resumed = run_process_events(
        "backfill", "resume", run_id, "--project", project, "--json", timeout=TIMEOUT
    )
    assert resumed.exit_code == 0, (resumed.stdout, resumed.stderr)
    events = resumed.events
    start, end = events[0], events[-1]
    assert (start["event"], start["run_id"]) == ("start", run_id)
    # the recorded plan, not one recomputed from the current code and active version
    assert start["version_id"] == original
    assert (start["batch_size"], start["max_concurrency"], start["rate_per_minute"]) == (1, 1, RATE)
    assert start["partitions"] == len(DAYS)
    # from the first partition not yet published, in order, each once
    redone = [e["partition"] for e in events if e["event"] == "partition"]
    assert redone == [str(d) for d in DAYS[len(published) :]]
    assert (end["status"], end["published"]) == ("succeeded", len(DAYS) - len(published))

    # every partition of the range: published by that run, with the plan's version
    writers = ledger_rows(
        project,
        "SELECT DISTINCT run_id, version_id FROM partitions WHERE model = ? "
        "AND attempt_id IS NOT NULL",
        (MODEL,),
    )
    assert writers == [(run_id, original)]
    assert published_days(project, run_id) == DAYS
    assert assert_ledger_matches_markers(project, MODEL) == len(DAYS)
    [(active,)] = ledger_rows(
        project, "SELECT active_version FROM model_state WHERE model = ?", (MODEL,)
    )
    assert active == newer
    assert show_run(project, run_id)["status"] == "succeeded"

    oracle = oracle_between(project, FIRST, LAST)
    assert {row[0] for row in oracle} == set(DAYS)
    assert_exactly_once(published_daily_revenue(project), oracle)
    assert_no_staging(project)
    assert live_attempts(project) == []


def test_stop_and_resume_refuse_what_they_cannot_do_and_write_nothing(project: Path) -> None:
    done = tidegate(
        "backfill", MODEL, "--partitions", "2025-01-01..2025-01-02", "--project", project
    )
    assert done.exit_code == 0, done.stderr
    [run] = listed_backfills(project)
    assert run["status"] == "succeeded"
    finished = run["run_id"]
    unknown = "run-20250101T000000000000Z-abcdef"

    before = state_dump(project)
    refusals = [
        (("stop", finished), f"backfill {finished} is not running (it is succeeded)"),
        (("resume", unknown), f"no backfill {unknown}"),
        (("stop", unknown), f"no backfill {unknown}"),
    ]
    for args, reason in refusals:
        refused = run_process("backfill", *args, "--project", project, timeout=TIMEOUT)
        assert refused.exit_code == 2, (args, refused.exit_code, refused.stderr)
        assert refused.stderr.splitlines() == [f"error: {reason}"], (args, refused.stderr)
        assert refused.stdout == ""
    # resuming what is done is no refusal: a no-op that exits 0 (retry loops call it again)
    noop = run_process("backfill", "resume", finished, "--project", project, timeout=TIMEOUT)
    assert noop.exit_code == 0 and noop.stdout.startswith(f"nothing to resume: {finished} ")
    assert state_dump(project) == before


@pytest.mark.crash
def test_stop_during_a_rate_wait_ends_the_backfill_promptly(project: Path) -> None:
    """Nothing is in flight while a backfill waits for its --rate window: a stop must not wait
    for the window to pass (up to a minute) before it takes effect."""
    prompt = 10.0
    with running(*_start(project, "--rate", "1/min")) as backfill:
        # 1/min: the first batch starts at once, the second not before a minute later
        wait_until("the first published partition", lambda: published_count(project), TIMEOUT)
        run_id = _running_run_id(project)
        stop = run_process("backfill", "stop", run_id, "--project", project, timeout=TIMEOUT)
        assert stop.exit_code == 0, stop.stderr
        result = backfill.finish(
            prompt, why="a stop requested while the backfill waits for its --rate window"
        )
    assert result.exit_code == 5, (result.exit_code, result.stderr)
    assert published_days(project) == [FIRST]
    assert show_run(project, run_id)["status"] == "stopped"
