"""The pure rules of distributed runs (domain/queue.py): tallies and when a run is over."""

from __future__ import annotations

from tidegate.domain.queue import BatchTally, RunTally


def test_tallies_add_and_subtract_field_by_field() -> None:
    first = BatchTally(published=3, failed=1, rows=9, source_rows=40, check_failures=1)
    second = BatchTally(published=2, skipped=1, rows=4, source_rows=20, mismatches=1)
    total = first.plus(second)
    assert total == BatchTally(5, 1, 1, 13, 60, 1, 1)
    assert total.minus(first) == second


def test_the_stop_loss_counts_published_and_failed_partitions_as_done() -> None:
    progress = BatchTally(published=5, failed=2, skipped=3, source_rows=70).progress(12.5)
    assert (progress.done, progress.failed, progress.source_rows) == (7, 2, 70)
    assert progress.elapsed_seconds == 12.5


def test_a_run_is_over_when_nothing_is_in_flight_and_nothing_may_start() -> None:
    assert not RunTally(BatchTally(), queued=0, in_flight=1).over(halted=True)
    assert not RunTally(BatchTally(), queued=2, in_flight=0).over(halted=False)
    assert RunTally(BatchTally(), queued=2, in_flight=0).over(halted=True)
    assert RunTally(BatchTally(), queued=0, in_flight=0).over(halted=False)
