"""The Clock seam: what "now" is. `--as-of` fixes it for schedules and tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol

from tidegate.domain.errors import UsageError
from tidegate.domain.partitions import TIME_SPAN, TIME_SPAN_SHOWN, to_epoch


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(timezone.utc)


@dataclass(frozen=True)
class FixedClock:
    at: datetime

    def now(self) -> datetime:
        return self.at


def parse_as_of(text: str) -> datetime:
    """`--as-of`: an ISO timestamp (UTC unless it names an offset) within the dates partitions
    lie in, since what is due is computed from it; UsageError otherwise."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--as-of {text!r} is not an ISO timestamp (2025-03-04T00:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    utc: datetime | None
    try:
        utc = moment.astimezone(timezone.utc)
    except OverflowError:  # its offset moves it before year 1 or past year 9999
        utc = None
    if utc is None or not TIME_SPAN[0] <= to_epoch(utc) < TIME_SPAN[1]:
        raise UsageError(
            f"--as-of {text!r} is outside the dates tidegate handles, {TIME_SPAN_SHOWN}"
        )
    return utc


def stamp(clock: Clock) -> str:
    """An ISO-8601 UTC timestamp for the ledger."""
    return clock.now().astimezone(timezone.utc).isoformat(timespec="microseconds")


class Timer(Protocol):
    """Elapsed time and waiting, for throttles and budgets. Tests substitute a fake."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemTimer:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class Polled:
    """A yes/no question asked of something slow (the ledger, from the coordinator between
    batches) at most once every `seconds`; in between, the last answer. Once yes, always yes."""

    def __init__(self, ask: Callable[[], bool], timer: Timer, seconds: float) -> None:
        self.ask, self.timer, self.seconds = ask, timer, seconds
        self.asked_at: float | None = None
        self.answer = False

    def __call__(self) -> bool:
        now = self.timer.monotonic()
        if not self.answer and (self.asked_at is None or now - self.asked_at >= self.seconds):
            self.asked_at, self.answer = now, self.ask()
        return self.answer
