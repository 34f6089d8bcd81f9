"""The Clock seam: what "now" is. `--as-of` fixes it for schedules and tests."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol


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
