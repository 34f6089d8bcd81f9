"""Which window a starting batch reads its sources in (execution/read_ahead.py): the stretch of
contiguous upcoming batches, never a partition no batch of the run will compute."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from tidegate.domain.backfill import BackfillPlan
from tidegate.domain.errors import EngineError
from tidegate.domain.model import Source
from tidegate.domain.partitions import DAY_SECONDS, Grain, IntervalSet, PartitionRange, parse_range
from tidegate.engines.base import Engine, PartitionProfile
from tidegate.execution.read_ahead import READ_AHEAD_PARTITIONS, Stretch, Upcoming

YEAR = parse_range("2025-01-01..2025-12-31", Grain.DAY)
FROZEN = frozenset({"orders"})
ORDERS = Source("orders", "orders", "order_ts")


def days(pairs: list[tuple[int, int]]) -> IntervalSet:
    return IntervalSet.of(
        [(YEAR.start + a * DAY_SECONDS, YEAR.start + (a + n) * DAY_SECONDS) for a, n in pairs]
    )


def started(batches: list[PartitionRange]) -> list[tuple[PartitionRange, Stretch]]:
    """Each batch as the coordinator starts it, with the stretch it is given."""
    upcoming = Upcoming(iter(enumerate(batches)), FROZEN)
    return [(batch, upcoming.stretch(batch)) for _, batch in upcoming]


@given(
    st.lists(st.tuples(st.integers(0, 80), st.integers(1, 40)), min_size=1, max_size=4),
    st.integers(1, 40),
    st.lists(st.tuples(st.integers(0, 120), st.integers(1, 10)), max_size=4),
)
def test_stretches_cover_their_batches_and_only_planned_partitions(
    spans: list[tuple[int, int]], batch_size: int, done_spans: list[tuple[int, int]]
) -> None:
    chosen = BackfillPlan("m", "v", Grain.DAY, days(spans).intervals, batch_size=batch_size)
    assert_stretches_keep_to(list(chosen.batches(skip=days(done_spans))))


def assert_stretches_keep_to(planned: list[PartitionRange]) -> None:
    seen = started(planned)
    # every batch, in the plan's order: buffering the ones ahead loses and reorders none
    assert [batch for batch, _ in seen] == planned
    computed = IntervalSet.of([(b.start, b.end) for b in planned])
    for batch, stretch in seen:
        assert stretch.covers(batch)
        # no partition read ahead that no batch of the run computes (a resume's gaps included)
        assert not IntervalSet.of([(stretch.start, stretch.end)]).minus(computed)
        width = len(PartitionRange(batch.grain, stretch.start, stretch.end))
        assert width <= max(READ_AHEAD_PARTITIONS, len(batch))


def test_one_day_batches_read_their_source_once_a_stretch() -> None:
    seen = started(list(BackfillPlan("m", "v", Grain.DAY, ((YEAR.start, YEAR.end),)).batches()))
    stretches = {id(stretch): stretch for _, stretch in seen}
    assert len(seen) == 365
    # 365 days in stretches of 32 days: 12 passes over the source instead of 365
    assert len(stretches) == 12
    widths = [(s.end - s.start) // DAY_SECONDS for s in stretches.values()]
    assert widths == [32] * 11 + [13]


def test_a_gap_ends_the_stretch() -> None:
    planned = [
        PartitionRange(Grain.DAY, YEAR.start + d * DAY_SECONDS, YEAR.start + (d + 1) * DAY_SECONDS)
        for d in (0, 1, 2, 5, 6)
    ]
    stretches = [stretch for _, stretch in started(planned)]
    assert [(s.start - YEAR.start) // DAY_SECONDS for s in stretches] == [0, 0, 0, 5, 5]
    assert [(s.end - YEAR.start) // DAY_SECONDS for s in stretches] == [3, 3, 3, 7, 7]


def test_a_batch_wider_than_a_stretch_reads_its_own_window() -> None:
    chosen = BackfillPlan("m", "v", Grain.DAY, ((YEAR.start, YEAR.end),), batch_size=40)
    for batch, stretch in started(list(chosen.batches())):
        assert (stretch.start, stretch.end) == (batch.start, batch.end)


@given(
    st.sampled_from(
        [(Grain.HOUR, "2025-03-30T00..2025-04-02T23"), (Grain.MONTH, "2023-01..2026-12")]
    ),
    st.integers(1, 40),
    st.sets(st.integers(0, 95), max_size=12),
)
def test_hour_and_month_stretches_cover_their_batches_and_only_planned_partitions(
    grain_and_range: tuple[Grain, str], batch_size: int, done_positions: set[int]
) -> None:
    grain, text = grain_and_range
    whole = parse_range(text, grain)
    every = list(whole)
    done = IntervalSet.of(
        [(every[i].start, every[i].end) for i in done_positions if i < len(every)]
    )
    chosen = BackfillPlan("m", "v", grain, ((whole.start, whole.end),), batch_size=batch_size)
    assert_stretches_keep_to(list(chosen.batches(skip=done)))


class CutShort:
    """Stands in for a warehouse whose pass over a stretch ends in `error`, while the pass over
    a single partition's window reads nothing: what the stretch's batches do about it."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.reads: list[tuple[Any, Any]] = []
        self.reading = threading.Event()

    def profile(
        self, table: str, staged: bool, column: str, grain: str, bounds: Any, **_: Any
    ) -> dict[int | None, PartitionProfile]:
        self.reads.append((bounds["start"], bounds["end"]))
        if bounds["end"] - bounds["start"] > timedelta(days=1):
            self.reading.set()
            raise self.error
        return {}


def day(n: int) -> PartitionRange:
    return PartitionRange(
        Grain.DAY, YEAR.start + n * DAY_SECONDS, YEAR.start + (n + 1) * DAY_SECONDS
    )


def read_in_two_batches(error: BaseException) -> tuple[CutShort, list[BaseException | None]]:
    """Two batches of a three-day stretch: the first reads the pass, the second waits for it."""
    stretch = Stretch(day(0).start, day(2).end, FROZEN)
    engine = CutShort(error)
    outcomes: list[BaseException | None] = [None, None]

    def batch(position: int, window: PartitionRange) -> None:
        try:
            stretch.profiles(cast(Engine, engine), ORDERS, "day", [], window)
        except BaseException as raised:
            outcomes[position] = raised

    first = threading.Thread(target=batch, args=(0, day(0)))
    first.start()
    assert engine.reading.wait(30)
    second = threading.Thread(target=batch, args=(1, day(1)))
    second.start()
    first.join(30)
    second.join(30)
    return engine, outcomes


def test_a_stretch_the_warehouse_fails_to_read_is_read_a_window_at_a_time() -> None:
    engine, outcomes = read_in_two_batches(EngineError("duckdb: Conversion Error"))
    # another partition's rows may be at fault: each batch reads its own window instead
    assert outcomes == [None, None]
    stretch_read, *own = engine.reads
    assert stretch_read == (to_naive(day(0).start), to_naive(day(2).end))
    assert sorted(own) == [(to_naive(day(n).start), to_naive(day(n).end)) for n in (0, 1)]


def test_a_stretch_cut_short_by_a_second_ctrl_c_stops_the_batches_waiting_for_it() -> None:
    engine, outcomes = read_in_two_batches(KeyboardInterrupt())
    assert all(isinstance(outcome, KeyboardInterrupt) for outcome in outcomes)
    # the waiting batch read nothing after the abort
    assert engine.reads == [(to_naive(day(0).start), to_naive(day(2).end))]


def to_naive(epoch: int) -> datetime:
    return datetime(1970, 1, 1) + timedelta(seconds=epoch)
