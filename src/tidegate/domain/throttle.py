"""The adaptive throttle: a backfill on a live database slows down when its batches take longer
than a bound (the database is busy) and speeds back up when they are quick again. Pure rules;
the executor feeds it each batch's latency and waits as long as it says.

Additive increase, multiplicative decrease (AIMD) on the rate of batch starts: a slow batch
halves the rate (never below MIN_RATE_PER_MINUTE), each quick one adds a tenth of the full rate
back, until the rate is the full one again and the throttle stands aside. The full rate is
`--rate` when given (the throttle never exceeds it), otherwise the rate the batches ran at when
the first slow one came.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from tidegate.domain.errors import UsageError

# the history event recording a change of rate with its run
THROTTLE_EVENT = "throttle"
MIN_RATE_PER_MINUTE = 1.0
DECREASE = 0.5
INCREASE_SHARE = 0.1

_DURATION = re.compile(r"^(?P<amount>\d+(\.\d+)?)\s*(?P<unit>ms|s|m)$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0}


def parse_seconds(text: str, what: str) -> float:
    """Seconds of a duration such as `500ms`, `2s` or `1.5m`; UsageError naming `what`."""
    match = _DURATION.match(text.strip())
    seconds = float(match["amount"]) * _UNIT_SECONDS[match["unit"]] if match else 0.0
    if seconds <= 0:
        raise UsageError(f"{what} {text!r}: expected a duration such as 500ms, 2s or 1m")
    return seconds


def shown_rate(rate: float | None) -> str:
    return "full speed" if rate is None else f"{rate:.4g}/min"


@dataclass(frozen=True)
class Adjustment:
    """One change of the throttle's rate, and the batch that caused it."""

    batch: int
    latency_seconds: float
    bound_seconds: float
    rate_before: float | None  # batch starts per minute; None: not limited by the throttle
    rate_after: float | None

    @property
    def reason(self) -> str:
        took = f"batch {self.batch} took {self.latency_seconds:.2f}s"
        if self.latency_seconds > self.bound_seconds:
            return (
                f"{took}, above the {self.bound_seconds:g}s bound: slowed from "
                f"{shown_rate(self.rate_before)} to {shown_rate(self.rate_after)}"
            )
        return (
            f"{took}, within the {self.bound_seconds:g}s bound: sped up from "
            f"{shown_rate(self.rate_before)} to {shown_rate(self.rate_after)}"
        )


@dataclass(frozen=True)
class AdaptiveThrottle:
    bound_seconds: float
    # --rate: the rate the throttle never exceeds (None: none given)
    ceiling_per_minute: float | None = None
    # the rate now; None: the throttle does not limit (only --rate does)
    rate_per_minute: float | None = None
    # the rate it returns to: the ceiling, or the rate when the first slow batch came
    full_per_minute: float | None = None

    def __post_init__(self) -> None:
        if self.bound_seconds <= 0:
            raise UsageError("--max-batch-latency must be positive")

    def observe(self, batch: int, latency: float) -> tuple[AdaptiveThrottle, Adjustment | None]:
        """The throttle after a batch that took `latency` seconds, and the change (None: the
        rate stays)."""
        if latency > self.bound_seconds:
            full = self.full_per_minute or self.ceiling_per_minute or 60.0 / max(latency, 1e-3)
            current = self.rate_per_minute if self.rate_per_minute is not None else full
            after = max(MIN_RATE_PER_MINUTE, current * DECREASE)
            if after == self.rate_per_minute:
                return self, None
            changed = replace(self, rate_per_minute=after, full_per_minute=full)
        elif self.rate_per_minute is not None and self.full_per_minute is not None:
            raised = self.rate_per_minute + self.full_per_minute * INCREASE_SHARE
            back = raised >= self.full_per_minute
            changed = replace(self, rate_per_minute=None if back else raised)
        else:
            return self, None
        adjustment = Adjustment(
            batch, latency, self.bound_seconds, self.rate_per_minute, changed.rate_per_minute
        )
        return changed, adjustment

    def delay(self, last_start: float | None, now: float) -> float:
        """Seconds to wait before the next batch starts, given the last start."""
        if self.rate_per_minute is None or last_start is None:
            return 0.0
        return max(0.0, last_start + 60.0 / self.rate_per_minute - now)
