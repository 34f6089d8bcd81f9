"""The adaptive throttle: AIMD on the rate of batch starts, driven by batch latencies and a
clock the test controls."""

from __future__ import annotations

import itertools

import pytest

from tidegate.domain.errors import UsageError
from tidegate.domain.throttle import MIN_RATE_PER_MINUTE, AdaptiveThrottle, parse_seconds


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def test_quick_batches_leave_the_rate_alone() -> None:
    throttle = AdaptiveThrottle(2.0, ceiling_per_minute=120)
    for batch in range(5):
        throttle, change = throttle.observe(batch, 0.5)
        assert change is None
    assert throttle.delay(last_start=10.0, now=10.0) == 0.0


def test_a_slow_batch_halves_the_rate_below_the_ceiling_and_says_why() -> None:
    throttle = AdaptiveThrottle(2.0, ceiling_per_minute=120)
    throttle, change = throttle.observe(3, 3.5)
    assert change is not None
    assert (change.rate_before, change.rate_after) == (None, 60.0)
    assert change.reason == (
        "batch 3 took 3.50s, above the 2s bound: slowed from full speed to 60/min"
    )
    # one start a second now: the next may start one second after the last
    assert throttle.delay(last_start=100.0, now=100.25) == pytest.approx(0.75)
    assert throttle.delay(last_start=100.0, now=101.5) == 0.0


def test_quick_batches_add_the_rate_back_a_tenth_at_a_time_never_above_the_ceiling() -> None:
    throttle = AdaptiveThrottle(1.0, ceiling_per_minute=100)
    throttle, _ = throttle.observe(0, 5.0)  # 100 → 50
    throttle, _ = throttle.observe(1, 5.0)  # → 25
    rates = []
    for batch in range(2, 12):
        throttle, change = throttle.observe(batch, 0.1)
        if change is not None:
            rates.append(change.rate_after)
    assert rates == [35.0, 45.0, 55.0, 65.0, 75.0, 85.0, 95.0, None]
    assert throttle.rate_per_minute is None  # back to the ceiling: only --rate applies


def test_without_a_ceiling_the_full_rate_is_what_the_batches_ran_at() -> None:
    throttle = AdaptiveThrottle(1.0)
    throttle, change = throttle.observe(0, 2.0)  # ran at 30/min one at a time
    assert change is not None and change.rate_after == 15.0
    assert throttle.full_per_minute == 30.0


def test_the_rate_never_falls_below_the_floor_and_a_floor_batch_is_no_change() -> None:
    throttle = AdaptiveThrottle(1.0, ceiling_per_minute=4)
    changes = []
    for batch in range(6):
        throttle, change = throttle.observe(batch, 10.0)
        changes.append(change)
    assert throttle.rate_per_minute == MIN_RATE_PER_MINUTE
    assert changes[-1] is None


def test_paced_by_a_controllable_clock_starts_spread_out_while_the_database_is_busy() -> None:
    clock = Clock()
    throttle = AdaptiveThrottle(1.0, ceiling_per_minute=60)
    starts: list[float] = []
    latencies = [0.2, 3.0, 3.0, 0.2, 0.2, 0.2]
    for batch, latency in enumerate(latencies):
        clock.advance(throttle.delay(starts[-1] if starts else None, clock.now))
        starts.append(clock.now)
        clock.advance(latency)
        throttle, _ = throttle.observe(batch, latency)
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(starts)]
    # 60/min then 30/min (2 s apart) then 15/min (4 s), then speeding up: 21/min, 27/min
    assert gaps == [0.2, 3.0, 4.0, round(60 / 21, 3), round(60 / 27, 3)]


@pytest.mark.parametrize(("text", "seconds"), [("500ms", 0.5), ("2s", 2.0), ("1.5m", 90.0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_seconds(text, "--lock-timeout") == seconds


@pytest.mark.parametrize("text", ["2", "0s", "-1s", "2h", "soon"])
def test_bad_durations_name_the_flag(text: str) -> None:
    with pytest.raises(UsageError, match="--lock-timeout"):
        parse_seconds(text, "--lock-timeout")


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(UsageError, match="positive"):
        AdaptiveThrottle(0.0)
