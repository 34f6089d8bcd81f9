"""Key-range partitions (chunks of an integer key, labelled by their first key) and the plans
over them: parsing, labels, iteration, length, alignment, and what a plan records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.domain.backfill import BackfillPlan
from tidegate.domain.errors import UsageError
from tidegate.domain.partitions import (
    Grain,
    IntervalSet,
    PartitionKey,
    PartitionRange,
    floor,
    following,
    parse_partition,
    parse_range,
)

CHUNK = 10_000


def test_a_chunk_is_labelled_by_its_first_key_and_spans_the_chunk_size() -> None:
    key = parse_partition("20000", Grain.RANGE, step=CHUNK)
    assert key == PartitionKey(Grain.RANGE, 20_000, 30_000)
    assert key.label() == "20000"


def test_ranges_read_like_date_ranges_first_key_to_first_key_of_the_last_chunk() -> None:
    chosen = parse_range("0..990000", Grain.RANGE, step=CHUNK)
    assert (chosen.start, chosen.end, chosen.step) == (0, 1_000_000, CHUNK)
    assert len(chosen) == 100
    assert chosen.label() == "0..990000"
    assert [k.start for k in chosen][:3] == [0, 10_000, 20_000]
    assert list(chosen)[-1] == PartitionKey(Grain.RANGE, 990_000, 1_000_000)
    single = parse_range("30000", Grain.RANGE, step=CHUNK)
    assert (len(single), single.label()) == (1, "30000")


def test_negative_keys_make_chunks_too() -> None:
    chosen = parse_range("-20000..0", Grain.RANGE, step=CHUNK)
    assert [k.start for k in chosen] == [-20_000, -10_000, 0]
    assert floor(Grain.RANGE, -1, CHUNK) == -10_000
    assert floor(Grain.RANGE, 19_999, CHUNK) == 10_000
    assert following(Grain.RANGE, 10_000, CHUNK) == 20_000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "25000",
            r"not the first key of a chunk of 10,000: chunks start at multiples of "
            r"10000 \(20000, 30000\)",
        ),
        ("0..12345", "not the first key of a chunk"),
        ("abc", "is not a key"),
        # digits of another script are not a key, however int() reads them
        ("\uff12\uff10\uff10\uff10\uff10", "is not a key"),
        ("2025-01-01..2025-01-31", "is not a key"),
        ("1.5", "is not a key"),
        ("20000..0", "ends before it starts"),
        ("all", "'all' of a key-range model is for backfill"),
        ("99999999999999999999", "is not a key"),
    ],
)
def test_bad_ranges_are_one_line_usage_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as raised:
        parse_range(text, Grain.RANGE, step=CHUNK)
    assert "\n" not in str(raised.value)


def test_a_key_range_without_its_chunk_size_is_a_bug_not_a_guess() -> None:
    with pytest.raises(ValueError, match="chunk size"):
        list(PartitionRange(Grain.RANGE, 0, 20_000))


def test_interval_arithmetic_is_unchanged_the_bounds_are_the_keys() -> None:
    plan = IntervalSet.of([(0, 100_000)]).minus(IntervalSet.of([(20_000, 40_000)]))
    ranges = plan.ranges(Grain.RANGE, CHUNK)
    assert [r.label() for r in ranges] == ["0..10000", "40000..90000"]
    assert sum(len(r) for r in ranges) == 8


@given(first=st.integers(-1000, 1000), count=st.integers(0, 50), chunk=st.integers(1, 10**6))
def test_iteration_and_length_agree_for_any_chunk(first: int, count: int, chunk: int) -> None:
    chosen = PartitionRange(Grain.RANGE, first * chunk, (first + count) * chunk, chunk)
    keys = list(chosen)
    assert len(keys) == len(chosen) == count
    assert all(k.end - k.start == chunk and k.start % chunk == 0 for k in keys)
    if keys:
        assert parse_range(chosen.label(), Grain.RANGE, step=chunk) == chosen


def test_a_plan_batches_chunks_and_records_the_chunk_size() -> None:
    plan = BackfillPlan(
        model="orders_net_revenue",
        version_id="0" * 12,
        grain=Grain.RANGE,
        selection=((0, 50_000),),
        batch_size=2,
        chunk_size=CHUNK,
        lock_timeout=2.0,
        max_batch_latency=0.5,
        requested="0..40000",
    )
    assert plan.partitions == 5
    assert [b.label() for b in plan.batches()] == ["0..10000", "20000..30000", "40000"]
    again = BackfillPlan.from_json(plan.to_json())
    assert again == plan


def test_a_time_plan_records_what_it_recorded_before_key_ranges() -> None:
    plan = BackfillPlan("daily_revenue", "0" * 12, Grain.DAY, ((0, 86_400),))
    assert not {"chunk_size", "lock_timeout", "statement_timeout", "max_batch_latency"} & set(
        __import__("json").loads(plan.to_json())
    )
    assert BackfillPlan.from_json(plan.to_json()) == plan


def test_time_and_key_list_grains_are_unchanged() -> None:
    days = parse_range("2025-01-01..2025-01-03", Grain.DAY)
    assert (len(days), days.label(), days.step) == (3, "2025-01-01..2025-01-03", 0)
    keys = parse_range("all", Grain.KEY, ("eu", "us"))
    assert [k.label(("eu", "us")) for k in keys] == ["eu", "us"]
    assert not Grain.RANGE.is_time and not Grain.KEY.is_time and Grain.DAY.is_time
