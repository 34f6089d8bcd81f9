"""Which window a starting batch reads its sources in (execution/read_ahead.py): the stretch of
contiguous upcoming batches, never a partition no batch of the run will compute."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidegate.domain.backfill import BackfillPlan
from tidegate.domain.partitions import DAY_SECONDS, Grain, IntervalSet, PartitionRange, parse_range
from tidegate.execution.read_ahead import READ_AHEAD_PARTITIONS, Stretch, Upcoming

YEAR = parse_range("2025-01-01..2025-12-31", Grain.DAY)
FROZEN = frozenset({"orders"})


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
    planned = list(chosen.batches(skip=days(done_spans)))
    seen = started(planned)
    # every batch, in the plan's order: buffering the ones ahead loses and reorders none
    assert [batch for batch, _ in seen] == planned
    computed = IntervalSet.of([(b.start, b.end) for b in planned])
    for batch, stretch in seen:
        assert stretch.covers(batch)
        # no partition read ahead that no batch of the run computes (a resume's gaps included)
        assert not IntervalSet.of([(stretch.start, stretch.end)]).minus(computed)
        width = len(PartitionRange(Grain.DAY, stretch.start, stretch.end))
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
