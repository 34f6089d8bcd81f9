"""Two backfills at once on the embedded default (docs/design.md §7, G7): the second exits 4 at once
with one line and writes nothing, or waits with --wait and runs once the first has stopped; never
two writers of one partition.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from tests.faults.backfill_kit import (
    MODEL,
    backfill_run_ids,
    days,
    first_attempt_start,
    listed_backfills,
    make_slow,
    published_count,
    published_days,
    run_row,
    running,
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
    state_dump,
)

FIRST, LAST = date(2025, 1, 1), date(2025, 3, 31)
OVERLAP = days(FIRST, date(2025, 1, 3))  # what the second backfill asks for: inside the first's
TIMEOUT = 60
# the ledger tables a running backfill does not touch
UNTOUCHED = ("schema_migrations", "versions", "model_state", "events")


def _backfill(project: Path, first: date, last: date, *extra: str) -> tuple[str, ...]:
    return (
        "backfill",
        MODEL,
        "--partitions",
        f"{first}..{last}",
        "--batch-size",
        "1",
        *extra,
        "--project",
        str(project),
    )


@pytest.mark.crash
def test_a_second_backfill_is_busy_and_a_waiting_one_runs_after_a_stop(project: Path) -> None:
    # each one-day batch first scans 30M generated rows: 90 of them keep the first backfill
    # running for many seconds, well past the few commands this test runs against it
    make_slow(project, 30_000_000)

    with running(*_backfill(project, FIRST, LAST)) as first:
        wait_until("the first published partition", lambda: published_count(project), TIMEOUT)
        [listed] = listed_backfills(project)
        first_run = listed["run_id"]
        assert listed["status"] == "running"
        before = state_dump(project)

        busy = run_process(*_backfill(project, FIRST, OVERLAP[-1]), timeout=TIMEOUT)
        assert first.alive(), "the busy backfill should have returned while the first runs"
        assert busy.exit_code == 4, (busy.exit_code, busy.stdout, busy.stderr)
        [line] = busy.stderr.splitlines()
        assert line.startswith("error: warehouse ") and "in use by another tidegate process" in line
        assert "--wait" in line
        assert busy.stdout == ""
        # it wrote nothing: no run, no attempt, nothing else in the tables the first leaves alone
        assert backfill_run_ids(project) == [first_run]
        assert ledger_rows(project, "SELECT DISTINCT run_id FROM attempts") == [(first_run,)]
        after = state_dump(project)
        assert {t: after[t] for t in UNTOUCHED} == {t: before[t] for t in UNTOUCHED}

        with running(*_backfill(project, FIRST, OVERLAP[-1], "--wait")) as waiting:
            waiting.wait_for_stderr("waiting for warehouse", TIMEOUT)
            assert waiting.alive() and first.alive()
            # waiting, it has not recorded a run (nor started any partition) yet
            assert backfill_run_ids(project) == [first_run]

            stop = run_process("backfill", "stop", first_run, "--project", project, timeout=TIMEOUT)
            assert stop.exit_code == 0, stop.stderr
            stopped = first.finish(TIMEOUT)
            assert stopped.exit_code == 5, (stopped.exit_code, stopped.stderr)
            done = waiting.finish(TIMEOUT)
    assert done.exit_code == 0, (done.stdout, done.stderr)
    assert sum("waiting for warehouse" in line for line in done.stderr.splitlines()) == 1

    runs = backfill_run_ids(project)
    assert len(runs) == 2 and runs[0] == first_run
    second_run = runs[1]
    assert run_row(project, first_run)["status"] == "stopped"
    assert run_row(project, second_run)["status"] == "succeeded"
    # one writer at a time: the waiting run started its first partition after the first ended
    ended = run_row(project, first_run)["ended_at"]
    assert ended is not None
    assert first_attempt_start(project, second_run) > ended

    # the second republished its days; the first keeps the rest of the prefix it published
    assert published_days(project, second_run) == OVERLAP
    published = published_days(project)
    assert published == days(FIRST, published[-1]) and len(published) < len(days(FIRST, LAST))
    assert set(published_days(project, first_run)) == set(published) - set(OVERLAP)
    assert assert_ledger_matches_markers(project, MODEL) == len(published)
    assert_exactly_once(
        published_daily_revenue(project), oracle_between(project, FIRST, published[-1])
    )
    assert_no_staging(project)
    assert live_attempts(project) == []
