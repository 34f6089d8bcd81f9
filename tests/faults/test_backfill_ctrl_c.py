"""Ctrl-C on a running backfill: the first behaves like `backfill stop` (in-flight batches finish
and publish, the run is resumable, exit 130); a second one aborts the in-flight batches without
publishing them (exit 130), and the next writer completes the range exactly once.
"""

from __future__ import annotations

import signal
from datetime import date
from pathlib import Path

import pytest

from tests.faults.backfill_kit import (
    MODEL,
    attempt_states,
    days,
    listed_backfills,
    make_slow,
    marker_days,
    markers_of,
    published_count,
    published_days,
    publishing_and_staging,
    run_row,
    running,
)
from tests.faults.ledger import (
    assert_ledger_matches_markers,
    live_attempts,
    oracle_between,
    wait_until,
)
from tests.kit import (
    assert_exactly_once,
    assert_no_staging,
    published_daily_revenue,
    run_process_events,
)

TIMEOUT = 60
STOPPING = "stopping after in-flight batches"


def _backfill(project: Path, first: date, last: date, *extra: str) -> tuple[str, ...]:
    return (
        "backfill",
        MODEL,
        "--partitions",
        f"{first}..{last}",
        *extra,
        "--project",
        str(project),
    )


def _resume_completes(project: Path, run_id: str, first: date, last: date) -> list[str]:
    """Resume `run_id`; check it succeeds and the range is the oracle, exactly once. Returns
    the partitions the resume published."""
    resumed = run_process_events(
        "backfill", "resume", run_id, "--project", project, "--json", timeout=TIMEOUT
    )
    assert resumed.exit_code == 0, (resumed.stdout, resumed.stderr)
    events = resumed.events
    assert events[-1]["event"] == "end" and events[-1]["status"] == "succeeded", events[-1]
    assert resumed.json()["status"] == "succeeded"
    oracle = oracle_between(project, first, last)
    assert {row[0] for row in oracle} == set(days(first, last))
    assert_exactly_once(published_daily_revenue(project), oracle)
    assert published_days(project, run_id) == days(first, last)
    assert assert_ledger_matches_markers(project, MODEL) == len(days(first, last))
    assert_no_staging(project)
    assert live_attempts(project) == []
    assert run_row(project, run_id)["status"] == "succeeded"
    return [e["partition"] for e in events if e["event"] == "partition"]


@pytest.mark.crash
def test_one_ctrl_c_stops_after_in_flight_batches_and_the_run_resumes(project: Path) -> None:
    first, last = date(2025, 1, 1), date(2025, 3, 31)
    every_day = days(first, last)
    make_slow(project, 10_000_000)  # keeps 90 one-day batches running for a few seconds

    command = _backfill(project, first, last, "--batch-size", "1", "--max-concurrency", "2")
    with running(*command) as backfill:
        wait_until("the first published partition", lambda: published_count(project), TIMEOUT)
        backfill.send_signal(signal.SIGINT)
        result = backfill.finish(TIMEOUT)
    assert result.exit_code == 130, (result.exit_code, result.stderr)
    [run] = listed_backfills(project)
    run_id = run["run_id"]
    # one message on stderr; the key press itself was acknowledged on the progress
    [line] = result.stderr.splitlines()
    assert line.startswith("stopped on request (Ctrl-C): "), line
    assert line.endswith(f" of 90 published; resume with tidegate backfill resume {run_id}")
    assert any(STOPPING in shown for shown in result.stdout.splitlines()), result.stdout

    # like a stop: resumable, and the batches in flight finished and were published
    assert run["status"] == "stopped", run
    published = published_days(project)
    assert 1 <= len(published) < len(every_day), published
    assert published == every_day[: len(published)], "not a prefix of the range"
    assert attempt_states(project, run_id) == [(d, "published") for d in published]
    assert live_attempts(project) == []
    assert marker_days(project) == published
    assert_no_staging(project)

    redone = _resume_completes(project, run_id, first, last)
    assert redone and sorted(redone) == [str(d) for d in every_day[len(published) :]]


@pytest.mark.crash
def test_a_second_ctrl_c_aborts_in_flight_batches_without_publishing_them(
    project: Path,
) -> None:
    first, last = date(2025, 1, 1), date(2025, 1, 6)
    # each batch's query scans 300M generated rows first (a second or more), so the second
    # Ctrl-C lands while DuckDB computes the batch in flight
    make_slow(project, 300_000_000)

    command = _backfill(project, first, last, "--batch-size", "2")
    with running(*command) as backfill:
        wait_until(
            "a published batch and the next one being computed",
            lambda: publishing_and_staging(project),
            TIMEOUT,
        )
        backfill.send_signal(signal.SIGINT)
        backfill.wait_for_stdout(STOPPING, TIMEOUT)
        backfill.send_signal(signal.SIGINT)
        result = backfill.finish(TIMEOUT)
    assert result.exit_code == 130, (result.exit_code, result.stderr)
    assert result.stderr.splitlines()[-1] == "interrupted", result.stderr
    [run] = listed_backfills(project)
    run_id = run["run_id"]
    assert (run["status"], run["reason"]) == ("interrupted", "aborted (Ctrl-C twice)")

    # the aborted batch: its attempts never reached an outcome, and nothing of it was published
    aborted = [a for a in live_attempts(project) if a[1] == run_id]
    assert aborted, "no batch was in flight at the second Ctrl-C"
    assert markers_of(project, [a[0] for a in aborted]) == []
    published = published_days(project)
    assert published == days(first, first.replace(day=2)), published
    assert marker_days(project) == published

    # the next writer reconciles what the aborted batch left and completes the range
    redone = _resume_completes(project, run_id, first, last)
    assert sorted(redone) == [str(d) for d in days(date(2025, 1, 3), last)]


@pytest.mark.crash
def test_ctrl_c_during_a_rate_wait_stops_promptly(project: Path) -> None:
    """Nothing is in flight while a backfill waits for its --rate window: the first Ctrl-C says
    it stops after the in-flight batches, and there are none, so it must stop now — not once
    the window has passed (up to a minute later)."""
    first, last = date(2025, 1, 1), date(2025, 1, 10)
    prompt = 10.0
    # 1/min: the first batch starts at once, the second not before a minute later
    command = _backfill(project, first, last, "--batch-size", "1", "--rate", "1/min")
    with running(*command) as backfill:
        wait_until("the first published partition", lambda: published_count(project), TIMEOUT)
        backfill.send_signal(signal.SIGINT)
        backfill.wait_for_stdout(STOPPING, TIMEOUT)
        result = backfill.finish(
            prompt, why="a Ctrl-C while the backfill waits for its --rate window"
        )
    assert result.exit_code == 130, (result.exit_code, result.stderr)
    [run] = listed_backfills(project)
    assert run["status"] == "stopped", run
    assert published_days(project) == [first]
