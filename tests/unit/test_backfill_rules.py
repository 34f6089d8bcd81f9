"""Backfill plans, the rate limiter and stop-loss: pure rules."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidegate.domain.backfill import (
    RATE_WINDOW_SECONDS,
    BackfillPlan,
    Progress,
    StopLoss,
    fired,
    next_start_delay,
    parse_rate,
)
from tidegate.domain.errors import UsageError
from tidegate.domain.model import Reconciliation
from tidegate.domain.partitions import DAY_SECONDS, Grain, IntervalSet, parse_range
from tidegate.domain.reconciliation import Sides, compare

YEAR = parse_range("2025-01-01..2025-12-31", Grain.DAY)


def plan(selection: tuple[tuple[int, int], ...], batch_size: int = 7) -> BackfillPlan:
    return BackfillPlan("daily_revenue", "abc", Grain.DAY, selection, batch_size=batch_size)


def test_batches_cover_the_selection_exactly_once_and_never_span_a_gap() -> None:
    march = parse_range("2025-03-01..2025-03-31", Grain.DAY)
    january = parse_range("2025-01-01..2025-01-10", Grain.DAY)
    chosen = plan(((january.start, january.end), (march.start, march.end)))
    batches = list(chosen.batches())
    covered = [key.start for batch in batches for key in batch]
    assert covered == [k.start for k in january] + [k.start for k in march]
    assert len(covered) == len(set(covered)) == chosen.partitions == 41
    assert all(len(b) <= 7 for b in batches)
    assert not any(b.start < march.start < b.end for b in batches)
    assert [len(b) for b in batches] == [7, 3, 7, 7, 7, 7, 3]


def test_batches_skip_checkpoints_for_resume() -> None:
    chosen = plan(((YEAR.start, YEAR.end),), batch_size=30)
    done = IntervalSet.of([(YEAR.start, YEAR.start + 40 * DAY_SECONDS)])
    first = next(chosen.batches(skip=done))
    assert first.start == YEAR.start + 40 * DAY_SECONDS
    assert sum(len(b) for b in chosen.batches(skip=done)) == 365 - 40


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 20)), min_size=1, max_size=4),
    st.integers(1, 9),
    st.lists(st.tuples(st.integers(0, 90), st.integers(1, 10)), max_size=3),
)
def test_the_batch_count_is_the_number_of_batches(
    spans: list[tuple[int, int]], batch_size: int, done_spans: list[tuple[int, int]]
) -> None:
    def days(pairs: list[tuple[int, int]]) -> IntervalSet:
        return IntervalSet.of(
            [(YEAR.start + a * DAY_SECONDS, YEAR.start + (a + n) * DAY_SECONDS) for a, n in pairs]
        )

    chosen = plan(days(spans).intervals, batch_size=batch_size)
    done = days(done_spans)
    assert chosen.batch_count(done) == len(list(chosen.batches(skip=done)))
    assert chosen.batch_count() == len(list(chosen.batches()))


def test_a_plan_over_a_million_hours_is_counted_without_iterating() -> None:
    hours = parse_range("2000-01-01T00..2114-01-29T15", Grain.HOUR)
    chosen = BackfillPlan("m", "v", Grain.HOUR, ((hours.start, hours.end),), batch_size=24)
    assert chosen.partitions == len(hours) == 1_000_000
    first = next(chosen.batches())
    assert len(first) == 24
    assert chosen.batch_count() == 1_000_000 // 24 + 1


def test_a_plan_round_trips_through_its_recorded_json() -> None:
    chosen = BackfillPlan(
        "daily_revenue",
        "abc",
        Grain.DAY,
        ((YEAR.start, YEAR.end),),
        batch_size=7,
        max_concurrency=2,
        rate_per_minute=30,
        stop_loss=StopLoss(max_failures=3),
        stale_only=True,
        requested="2025-01-01..2025-12-31",
    )
    assert BackfillPlan.from_json(chosen.to_json()) == chosen


@pytest.mark.parametrize("text", ["0/min", "5/hour", "x/min", "30", "-1/min"])
def test_bad_rates_are_refused(text: str) -> None:
    with pytest.raises(UsageError):
        parse_rate(text)


def test_rates_parse() -> None:
    assert parse_rate("30/min") == 30
    assert parse_rate(None) is None


@settings(max_examples=200, deadline=None)
@given(
    rate=st.integers(min_value=1, max_value=5),
    gaps=st.lists(st.floats(min_value=0, max_value=30), min_size=1, max_size=40),
)
def test_the_limiter_never_allows_more_than_rate_starts_in_any_minute(
    rate: int, gaps: list[float]
) -> None:
    now, starts = 0.0, []
    for gap in gaps:
        now += gap
        now += max(0.0, next_start_delay(starts, now, rate))
        assert next_start_delay(starts, now, rate) <= 1e-9
        starts.append(now)
    for start in starts:
        window = [s for s in starts if start - RATE_WINDOW_SECONDS < s <= start]
        assert len(window) <= rate


def test_the_limiter_waits_exactly_until_the_oldest_start_leaves_the_window() -> None:
    assert next_start_delay([0.0, 10.0], 20.0, 2) == pytest.approx(40.0)
    assert next_start_delay([0.0, 10.0], 20.0, 3) == 0.0
    assert next_start_delay([0.0, 10.0], 70.0, 2) == 0.0
    assert next_start_delay([], 0.0, None) == 0.0


def test_stop_loss_fires_on_the_first_condition_met() -> None:
    loss = StopLoss(max_failures=2, max_failure_ratio=0.5, max_source_rows=100, max_wall_seconds=60)
    assert fired(loss, Progress(done=10, failed=1, source_rows=50), "d") is None
    hit = fired(loss, Progress(done=10, failed=2), "2025-01-05")
    assert hit is not None and (hit.name, hit.partition) == ("max_failures", "2025-01-05")
    assert fired(loss, Progress(done=2, failed=1), "x").name == "max_failure_ratio"  # type: ignore[union-attr]
    assert fired(loss, Progress(source_rows=101), "x").name == "max_source_rows"  # type: ignore[union-attr]
    assert fired(loss, Progress(elapsed_seconds=61), "x").name == "max_wall_time"  # type: ignore[union-attr]
    assert fired(StopLoss(), Progress(check_failures=1), "x").name == "check_failure"  # type: ignore[union-attr]
    assert fired(StopLoss(halt_on_check_failure=False), Progress(check_failures=1), "x") is None
    assert fired(StopLoss(), Progress(reconciliation_mismatches=1), "x").name == (  # type: ignore[union-attr]
        "reconciliation_mismatch"
    )


@pytest.mark.parametrize(
    "arguments",
    [
        {"max_failures": 0},
        {"max_failure_ratio": 1.5},
        {"max_source_rows": 0},
        {"max_wall_seconds": 0},
    ],
)
def test_impossible_stop_losses_are_refused(arguments: dict[str, float]) -> None:
    with pytest.raises(UsageError):
        StopLoss(**arguments)  # type: ignore[arg-type]


ROWS = Sides(source_rows=20, target_rows=4, may_be_empty=False)


def test_reconciliation_compares_within_tolerance_and_treats_a_sum_of_nulls_as_zero() -> None:
    exact = Reconciliation("net", "orders", "sum(a)", "sum(b)")
    assert compare(exact, "10.00", "10.00", ROWS).passed
    assert not compare(exact, "10.00", "10.01", ROWS).passed
    # rows on both sides whose values are all NULL: their sum is nothing, zero
    assert compare(exact, None, "0", ROWS).passed
    loose = Reconciliation("net", "orders", "sum(a)", "sum(b)", tolerance="0.05")
    assert compare(loose, "10.00", "10.05", ROWS).passed
    assert not compare(loose, "10.00", "10.06", ROWS).passed
    assert Decimal(compare(loose, "1", "2", ROWS).tolerance) == Decimal("0.05")


def test_a_reconciliation_of_nothing_against_nothing_passes_only_where_empty_is_allowed() -> None:
    rule = Reconciliation("orders", "daily_revenue", "sum(order_count)", "sum(order_count)")
    empty = Sides(source_rows=0, target_rows=0, may_be_empty=False)
    refused = compare(rule, None, None, empty)
    assert not refused.passed
    assert "neither side has rows" in refused.message
    assert compare(rule, None, None, replace(empty, may_be_empty=True)).passed


@pytest.mark.parametrize(
    ("source", "target", "sides", "why"),
    [
        ("200", None, Sides(20, 0, True), "the target has no rows against 20 source row(s)"),
        (None, "0", Sides(0, 3, True), "the source has no rows against 3 target row(s)"),
        ("0", "0", Sides(0, 3, True), "the source has no rows against 3 target row(s)"),
    ],
)
def test_one_side_without_rows_never_reconciles(
    source: str | None, target: str | None, sides: Sides, why: str
) -> None:
    rule = Reconciliation("orders", "orders", "count(*)", "sum(order_count)")
    found = compare(rule, source, target, sides)
    assert not found.passed
    assert found.message.endswith(f"(MISMATCH: {why})")


def test_a_slow_question_is_asked_at_most_once_per_interval_and_a_yes_sticks() -> None:
    from tidegate.domain.clock import Polled

    class Timer:
        now = 0.0

        def monotonic(self) -> float:
            return self.now

        def sleep(self, seconds: float) -> None:
            self.now += seconds

    timer, asked, answers = Timer(), [], iter([False, True])

    def ask() -> bool:
        asked.append(timer.now)
        return next(answers)

    polled = Polled(ask, timer, 0.5)
    assert [polled(), polled()] == [False, False] and asked == [0.0]
    timer.sleep(0.4)
    assert polled() is False and asked == [0.0]
    timer.sleep(0.1)
    assert polled() is True and asked == [0.0, 0.5]
    timer.sleep(5)
    assert polled() is True and asked == [0.0, 0.5]  # answered yes: never asked again


def test_the_pace_of_a_throttle_is_one_window_per_round_of_starts() -> None:
    from tidegate.domain.backfill import paced_seconds

    assert paced_seconds(5, [], 0.0, None) == 0.0
    assert paced_seconds(0, [0.0] * 5, 10.0, 5) == 0.0
    # five starts at 0..8s: the next five wait for them to leave the window
    assert paced_seconds(5, [0.0, 2.0, 4.0, 6.0, 8.0], 10.0, 5) == 58.0
    assert paced_seconds(1, [0.0, 2.0, 4.0, 6.0, 8.0], 10.0, 5) == 50.0
    # a window with room: the first of them starts now
    assert paced_seconds(1, [0.0], 10.0, 5) == 0.0
    assert paced_seconds(5, [], 0.0, 5) == 0.0
    assert paced_seconds(6, [], 0.0, 5) == 60.0
    # 30 of 90 left at 60/min, the 60 before started together at 0s: one more window
    assert paced_seconds(30, [0.0] * 60, 1.0, 60) == 59.0


@given(
    gaps=st.lists(st.floats(0, 30), min_size=0, max_size=20),
    batches=st.integers(1, 40),
    rate=st.integers(1, 8),
)
@settings(max_examples=200, deadline=None)
def test_the_pace_is_when_the_limiter_would_start_the_last_batch(
    gaps: list[float], batches: int, rate: int
) -> None:
    from tidegate.domain.backfill import paced_seconds

    starts, at = [], 0.0
    for gap in gaps:
        at += gap
        starts.append(at)
    now = at + 1.0
    expected = paced_seconds(batches, starts, now, rate)
    # the limiter, step by step, each batch taking no time
    history, clock = list(starts), now
    for _ in range(batches):
        clock += max(0.0, next_start_delay(history, clock, rate))
        history.append(clock)
    assert abs((clock - now) - expected) < 1e-3, (clock - now, expected)


def test_the_eta_is_the_slower_of_the_measured_pace_and_the_throttle() -> None:
    from tidegate.domain.backfill import eta_seconds

    starts = [0.0, 2.0, 4.0, 6.0, 8.0]
    # 5 of 10 done in 10s at 5/min: the pace says 10s more, the throttle 60s (the last slot at
    # 68s, and a 2s batch)
    assert eta_seconds(5, 5, 5, 10.0, starts, 10.0, 5, 2.0) == 60.0
    assert eta_seconds(5, 5, 5, 10.0, starts, 10.0, None, 2.0) == 10.0
    # batches slower than their slots: the measured pace
    assert eta_seconds(1, 1, 9, 900.0, [0.0], 900.0, 5, 100.0) == 100.0
    assert eta_seconds(0, 0, 10, 70.0, starts, 70.0, 5, 2.0) == 0.0


def test_a_resume_carries_the_recorded_starts_inside_the_window() -> None:
    from datetime import datetime, timedelta, timezone

    from tidegate.domain.backfill import carried_starts

    now = datetime(2025, 7, 1, 12, tzinfo=timezone.utc)
    ago = [now - timedelta(seconds=s) for s in (90, 50, 50, 20, 5, -30)]
    # a batch's partitions share its start; older than the window or after now: dropped
    assert carried_starts(ago, now, 1000.0, 30) == (950.0, 980.0, 995.0)
    assert carried_starts(ago, now, 1000.0, 2) == (980.0, 995.0)
    assert carried_starts(ago, now, 1000.0, None) == ()
