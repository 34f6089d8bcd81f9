"""Partition keys, ranges and interval arithmetic (docs/design.md §7: typed, ordered, never one
object per partition for a million-partition plan)."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.domain import partitions
from tidegate.domain.clock import parse_as_of
from tidegate.domain.errors import UsageError
from tidegate.domain.partitions import (
    DAY_SECONDS,
    HOUR_SECONDS,
    Grain,
    IntervalSet,
    PartitionKey,
    PartitionRange,
    floor,
    following,
    parse_partition,
    parse_range,
    to_epoch,
)

TIME_GRAINS = (Grain.HOUR, Grain.DAY, Grain.MONTH)
FIRST = to_epoch(datetime(1971, 1, 1, tzinfo=timezone.utc))
# Last instant of 2200, so every generated partition starts in 1971..2200.
LAST = to_epoch(datetime(2201, 1, 1, tzinfo=timezone.utc)) - 1

instants = st.integers(min_value=FIRST, max_value=LAST)
time_grains = st.sampled_from(TIME_GRAINS)


def advance(grain: Grain, start: int, steps: int) -> int:
    for _ in range(steps):
        start = following(grain, start)
    return start


# --- floor / following -------------------------------------------------------------------------


@given(grain=time_grains, ts=instants)
def test_floor_is_the_start_of_the_partition_holding_the_instant(grain: Grain, ts: int) -> None:
    start = floor(grain, ts)
    nxt = following(grain, start)
    assert start <= ts < nxt
    assert floor(grain, start) == start
    assert floor(grain, nxt) == nxt
    assert floor(grain, nxt - 1) == start


@given(grain=time_grains, ts=instants)
def test_following_lands_on_a_partition_start(grain: Grain, ts: int) -> None:
    nxt = following(grain, floor(grain, ts))
    assert floor(grain, nxt) == nxt
    assert nxt > floor(grain, ts)


@given(ts=instants)
def test_grain_sizes(ts: int) -> None:
    assert following(Grain.HOUR, floor(Grain.HOUR, ts)) - floor(Grain.HOUR, ts) == HOUR_SECONDS
    assert following(Grain.DAY, floor(Grain.DAY, ts)) - floor(Grain.DAY, ts) == DAY_SECONDS
    month = floor(Grain.MONTH, ts)
    moment = datetime.fromtimestamp(month, tz=timezone.utc)
    assert (moment.day, moment.hour, moment.minute, moment.second) == (1, 0, 0, 0)
    assert (following(Grain.MONTH, month) - month) // DAY_SECONDS in (28, 29, 30, 31)


def test_month_following_crosses_year_and_leap_february() -> None:
    dec = to_epoch(datetime(2024, 12, 1, tzinfo=timezone.utc))
    assert following(Grain.MONTH, dec) == to_epoch(datetime(2025, 1, 1, tzinfo=timezone.utc))
    feb = to_epoch(datetime(2024, 2, 1, tzinfo=timezone.utc))
    assert following(Grain.MONTH, feb) - feb == 29 * DAY_SECONDS


@given(position=st.integers(min_value=0, max_value=10_000))
def test_key_grain_positions(position: int) -> None:
    assert floor(Grain.KEY, position) == position
    assert following(Grain.KEY, position) == position + 1


# --- labels --------------------------------------------------------------------------------------


@given(grain=time_grains, ts=instants)
def test_label_and_parse_round_trip(grain: Grain, ts: int) -> None:
    key = PartitionKey(grain, floor(grain, ts), following(grain, floor(grain, ts)))
    label = key.label()
    assert parse_partition(label, grain) == key
    assert parse_partition(f"  {label} ", grain) == key


def test_label_shapes() -> None:
    ts = to_epoch(datetime(2025, 3, 4, 5, 6, 7, tzinfo=timezone.utc))
    shown = {
        g: PartitionKey(g, floor(g, ts), following(g, floor(g, ts))).label() for g in TIME_GRAINS
    }
    assert shown == {Grain.HOUR: "2025-03-04T05", Grain.DAY: "2025-03-04", Grain.MONTH: "2025-03"}


@pytest.mark.parametrize(
    ("text", "grain"),
    [
        ("2025-3-4", Grain.DAY),
        ("2025-03-04T05", Grain.DAY),
        ("2025-03-04", Grain.HOUR),
        ("2025-03-04", Grain.MONTH),
        ("2025-13", Grain.MONTH),
        ("2025-02-30", Grain.DAY),
        ("2025-03-04T24", Grain.HOUR),
        ("yesterday", Grain.DAY),
        ("", Grain.DAY),
    ],
)
def test_malformed_labels_are_usage_errors(text: str, grain: Grain) -> None:
    with pytest.raises(UsageError) as raised:
        parse_partition(text, grain)
    assert raised.value.exit_code == 2
    assert grain.value in str(raised.value) or "valid date" in str(raised.value)


def test_key_labels_are_positions_in_the_declared_list() -> None:
    keys = ("eu", "us", "x'); DROP TABLE orders; --")
    for index, key in enumerate(keys):
        parsed = parse_partition(key, Grain.KEY, keys)
        assert parsed == PartitionKey(Grain.KEY, index, index + 1)
        assert parsed.label(keys) == key
    with pytest.raises(UsageError, match="unknown partition key 'apac'"):
        parse_partition("apac", Grain.KEY, keys)


# --- ranges --------------------------------------------------------------------------------------


@given(grain=time_grains, ts=instants, count=st.integers(min_value=0, max_value=72))
def test_len_equals_the_number_of_iterated_keys(grain: Grain, ts: int, count: int) -> None:
    start = floor(grain, ts)
    span = PartitionRange(grain, start, advance(grain, start, count))
    keys = list(span)
    assert len(span) == len(keys) == count
    assert all(k.grain is grain for k in keys)
    # consecutive and covering [start, end) without gaps
    assert [k.start for k in keys[1:]] == [k.end for k in keys[:-1]]
    if keys:
        assert (keys[0].start, keys[-1].end) == (span.start, span.end)


@given(grain=time_grains, ts=instants, count=st.integers(min_value=0, max_value=40))
def test_parse_range_bounds_are_inclusive(grain: Grain, ts: int, count: int) -> None:
    first_start = floor(grain, ts)
    last_start = advance(grain, first_start, count)
    first = PartitionKey(grain, first_start, following(grain, first_start)).label()
    last = PartitionKey(grain, last_start, following(grain, last_start)).label()
    span = parse_range(f"{first}..{last}", grain)
    assert len(span) == count + 1
    keys = list(span)
    assert keys[0].label() == first
    assert keys[-1].label() == last
    assert span.start == first_start
    assert span.end == following(grain, last_start)
    assert parse_range(span.label(), grain) == span


@given(grain=time_grains, ts=instants)
def test_a_single_partition_is_a_range_of_one(grain: Grain, ts: int) -> None:
    start = floor(grain, ts)
    label = PartitionKey(grain, start, following(grain, start)).label()
    span = parse_range(label, grain)
    assert len(span) == 1
    assert span.label() == label


@given(grain=time_grains, ts=instants, count=st.integers(min_value=1, max_value=40))
def test_a_reversed_range_is_refused(grain: Grain, ts: int, count: int) -> None:
    first_start = floor(grain, ts)
    later = advance(grain, first_start, count)
    first = PartitionKey(grain, first_start, following(grain, first_start)).label()
    last = PartitionKey(grain, later, following(grain, later)).label()
    with pytest.raises(UsageError, match="ends before it starts") as raised:
        parse_range(f"{last}..{first}", grain)
    assert raised.value.exit_code == 2


def test_all_is_for_key_lists_only() -> None:
    keys = ("a", "b", "c")
    assert parse_range("all", Grain.KEY, keys) == PartitionRange(Grain.KEY, 0, 3)
    assert len(parse_range("all", Grain.KEY, keys)) == 3
    assert parse_range("b..c", Grain.KEY, keys) == PartitionRange(Grain.KEY, 1, 3)
    with pytest.raises(UsageError, match="only for key-list models"):
        parse_range("all", Grain.DAY)


def test_range_labels() -> None:
    assert parse_range("2025-01-01..2025-01-31", Grain.DAY).label() == "2025-01-01..2025-01-31"
    assert parse_range("2025-01..2025-12", Grain.MONTH).label() == "2025-01..2025-12"
    assert parse_range("2025-02", Grain.MONTH).label() == "2025-02"
    assert PartitionRange(Grain.DAY, 10 * DAY_SECONDS, 10 * DAY_SECONDS).label() == "(empty)"
    assert len(parse_range("2024-01..2024-12", Grain.MONTH)) == 12
    assert len(parse_range("2024-01-01..2024-12-31", Grain.DAY)) == 366


def test_a_range_cannot_end_before_it_starts() -> None:
    with pytest.raises(ValueError, match="cannot end before it starts"):
        PartitionRange(Grain.DAY, DAY_SECONDS, 0)


def test_len_of_a_million_hour_range_is_arithmetic(monkeypatch: pytest.MonkeyPatch) -> None:
    span = parse_range("2000-01-01T00..2114-12-31T23", Grain.HOUR)
    expected = (date(2115, 1, 1).toordinal() - date(2000, 1, 1).toordinal()) * 24
    assert expected > 1_000_000

    def no_iteration(grain: Grain, start: int) -> int:
        raise AssertionError("len() must not walk the partitions")

    monkeypatch.setattr(partitions, "following", no_iteration)
    assert len(span) == expected


def test_len_of_long_day_and_month_ranges_is_arithmetic() -> None:
    days = parse_range("1971-01-01..2200-12-31", Grain.DAY)
    assert len(days) == date(2201, 1, 1).toordinal() - date(1971, 1, 1).toordinal()
    months = parse_range("1971-01..2200-12", Grain.MONTH)
    assert len(months) == (2200 - 1971 + 1) * 12


# --- interval sets -------------------------------------------------------------------------------

pairs = st.lists(
    st.tuples(st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=40)),
    max_size=8,
)


def covered(intervals: tuple[tuple[int, int], ...] | list[tuple[int, int]]) -> set[int]:
    return {point for start, end in intervals for point in range(start, end)}


def assert_canonical(found: IntervalSet) -> None:
    """Sorted, non-empty, disjoint and not touching (touching intervals are merged)."""
    for start, end in found.intervals:
        assert start < end
    for (_, end), (start, _) in zip(found.intervals, found.intervals[1:], strict=False):
        assert end < start


@given(pairs)
def test_of_merges_into_the_same_point_set(given_pairs: list[tuple[int, int]]) -> None:
    merged = IntervalSet.of(given_pairs)
    assert covered(merged.intervals) == covered(given_pairs)
    assert_canonical(merged)
    assert bool(merged) == bool(covered(given_pairs))
    assert IntervalSet.of(list(reversed(given_pairs))) == merged


@given(pairs, pairs)
def test_minus_matches_set_difference(
    left: list[tuple[int, int]], right: list[tuple[int, int]]
) -> None:
    difference = IntervalSet.of(left).minus(IntervalSet.of(right))
    assert covered(difference.intervals) == covered(left) - covered(right)
    assert_canonical(difference)
    assert bool(difference) == bool(covered(left) - covered(right))


@given(pairs)
def test_minus_itself_is_empty_and_minus_nothing_is_itself(
    given_pairs: list[tuple[int, int]],
) -> None:
    interval_set = IntervalSet.of(given_pairs)
    assert not interval_set.minus(interval_set)
    assert interval_set.minus(IntervalSet()) == interval_set


def test_ranges_turn_intervals_into_partition_ranges() -> None:
    gaps = IntervalSet.of([(0, 3 * DAY_SECONDS)]).minus(
        IntervalSet.of([(DAY_SECONDS, 2 * DAY_SECONDS)])
    )
    assert gaps.ranges(Grain.DAY) == [
        PartitionRange(Grain.DAY, 0, DAY_SECONDS),
        PartitionRange(Grain.DAY, 2 * DAY_SECONDS, 3 * DAY_SECONDS),
    ]
    assert [r.label() for r in gaps.ranges(Grain.DAY)] == ["1970-01-01", "1970-01-03"]


# --- the dates tidegate handles ------------------------------------------------------------------

# Every partition between the first and the last one tidegate handles, labels of years before
# 1000 included
EARLIEST = partitions.TIME_SPAN[0]
LATEST = partitions.TIME_SPAN[1] - 1
anywhen = st.integers(min_value=EARLIEST, max_value=LATEST)


@given(grain=time_grains, ts=anywhen)
def test_every_partition_in_the_span_round_trips_through_its_label(grain: Grain, ts: int) -> None:
    start = floor(grain, ts)
    key = PartitionKey(grain, start, following(grain, start))
    assert parse_partition(key.label(), grain) == key
    assert parse_range(PartitionRange(grain, start, key.end).label(), grain).start == start


def test_the_labels_of_early_years_have_four_digits() -> None:
    start = to_epoch(datetime(999, 3, 4, 5, tzinfo=timezone.utc))
    shown = {
        g: PartitionKey(g, floor(g, start), following(g, floor(g, start))).label()
        for g in TIME_GRAINS
    }
    assert shown == {Grain.HOUR: "0999-03-04T05", Grain.DAY: "0999-03-04", Grain.MONTH: "0999-03"}


@pytest.mark.parametrize(
    ("text", "grain"),
    [
        # the partition after these, or the month holding them, is past year 9999
        ("9999-12-31", Grain.DAY),
        ("9999-01-01", Grain.DAY),
        ("9999-12", Grain.MONTH),
        ("9999-01", Grain.MONTH),
        ("9999-12-31T23", Grain.HOUR),
        ("9999-06-15T11", Grain.HOUR),
        # the partition before these is before year 1
        ("0001-01-01", Grain.DAY),
        ("0001-12-31", Grain.DAY),
        ("0001-01", Grain.MONTH),
        ("0001-01-01T00", Grain.HOUR),
    ],
)
def test_partitions_at_the_ends_of_the_calendar_are_refused(text: str, grain: Grain) -> None:
    for given_text in (text, f"{text}..{text}"):
        with pytest.raises(UsageError) as raised:
            parse_range(given_text, grain)
        assert raised.value.exit_code == 2
        assert "0002-01-01 to 9998-12-31" in str(raised.value), raised.value
    with pytest.raises(UsageError, match="0002-01-01 to 9998-12-31"):
        parse_partition(text, grain)


@pytest.mark.parametrize(
    ("text", "grain"),
    [
        ("2025-01-01..9999-12-31", Grain.DAY),
        ("0001-01-01..2025-01-01", Grain.DAY),
        ("2025-01..9999-12", Grain.MONTH),
        ("9998-12-31T23..9999-12-31T23", Grain.HOUR),
    ],
)
def test_a_range_reaching_past_the_calendar_is_refused(text: str, grain: Grain) -> None:
    with pytest.raises(UsageError, match="0002-01-01 to 9998-12-31"):
        parse_range(text, grain)


@pytest.mark.parametrize(
    ("text", "grain"),
    [
        ("0002-01-01", Grain.DAY),
        ("9998-12-31", Grain.DAY),
        ("0002-01", Grain.MONTH),
        ("9998-12", Grain.MONTH),
        ("0002-01-01T00", Grain.HOUR),
        ("9998-12-31T23", Grain.HOUR),
        ("0002-01-01..9998-12-31", Grain.DAY),
    ],
)
def test_the_first_and_last_partitions_handled_are_whole(text: str, grain: Grain) -> None:
    span = parse_range(text, grain)
    assert span.label() == text
    assert EARLIEST <= span.start < span.end <= partitions.TIME_SPAN[1]
    last = PartitionKey(grain, floor(grain, span.end - 1), span.end)
    # the partitions either side, and the month holding them, are dates still
    assert floor(Grain.MONTH, span.start - 1) < span.start
    assert following(Grain.MONTH, floor(Grain.MONTH, last.start)) >= last.end


@pytest.mark.parametrize(
    "text",
    ["99999-01-01", "-001-01-01", "10000-01-01", "9" * 400, "2025-02-29", "0000-01-01", " "],
)
def test_impossible_dates_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_range(text, Grain.DAY)


@given(
    text=st.text(max_size=30)
    | st.from_regex(r"-?\d{1,6}-\d{1,3}(-\d{1,3}(T\d{1,3})?)?", fullmatch=True),
    grain=time_grains,
)
def test_any_text_is_a_range_within_the_span_or_a_usage_error(text: str, grain: Grain) -> None:
    try:
        span = parse_range(text, grain)
    except UsageError:
        return
    assert EARLIEST <= span.start < span.end <= partitions.TIME_SPAN[1]


@given(
    moment=st.datetimes(
        min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)
    ).map(lambda moment: moment.replace(microsecond=0)),
    offset=st.integers(-23 * 60 - 59, 23 * 60 + 59),
)
def test_any_as_of_is_an_instant_within_the_span_or_a_usage_error(
    moment: datetime, offset: int
) -> None:
    sign = "-" if offset < 0 else "+"
    text = f"{moment.isoformat()}{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"
    try:
        parsed = parse_as_of(text)
    except UsageError as error:
        assert "--as-of" in str(error)
        return
    assert EARLIEST <= to_epoch(parsed) <= LATEST
    assert parsed.tzinfo is timezone.utc


def test_a_whole_table_is_one_partition_named_all() -> None:
    whole = parse_partition("all", Grain.TABLE)
    assert whole == partitions.WHOLE_TABLE == PartitionKey(Grain.TABLE, 0, 1)
    assert whole.label() == "all"
    for text in ("all", " all ", "all..all"):
        span = parse_range(text, Grain.TABLE)
        assert span == PartitionRange(Grain.TABLE, 0, 1)
        assert list(span) == [whole] and len(span) == 1
        assert span.label() == "all"
    assert PartitionRange(Grain.TABLE, 1, 1).label() == "(empty)"
    assert following(Grain.TABLE, whole.start) == whole.end
    assert not Grain.TABLE.is_time


@pytest.mark.parametrize("text", ["2025-01-01", "ALL", "0", "a", "all..2025-01-01", ""])
def test_a_whole_table_has_no_other_partition(text: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_range(text, Grain.TABLE)
    assert raised.value.exit_code == 2
    assert "its one partition is 'all'" in str(raised.value)
