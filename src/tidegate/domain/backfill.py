"""Backfill plans, batches, throttling and stop-loss: pure rules, no I/O.

A plan is recorded with its run, so `resume` continues exactly the plan that was started —
never one recomputed from today's date or the current code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from tidegate.domain.errors import UsageError
from tidegate.domain.partitions import Grain, IntervalSet, PartitionRange, following

RATE_WINDOW_SECONDS = 60.0
# plan fields recorded only when set
OPTIONAL_FIELDS = ("chunk_size", "lock_timeout", "statement_timeout", "max_batch_latency")
# Waits end this much past the window, so float rounding never lets a start in early.
RATE_MARGIN_SECONDS = 1e-6


@dataclass(frozen=True)
class StopLoss:
    """Conditions that halt a backfill: no new batch starts once one fires."""

    max_failures: int | None = None
    max_failure_ratio: float | None = None
    halt_on_check_failure: bool = True
    halt_on_reconciliation_mismatch: bool = True
    max_source_rows: int | None = None
    max_wall_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.max_failures is not None and self.max_failures < 1:
            raise UsageError("--max-failures must be at least 1")
        if self.max_failure_ratio is not None and not 0 < self.max_failure_ratio <= 1:
            raise UsageError("max_failure_ratio must be in (0, 1]")
        if self.max_source_rows is not None and self.max_source_rows < 1:
            raise UsageError("max_source_rows must be at least 1")
        if self.max_wall_seconds is not None and self.max_wall_seconds <= 0:
            raise UsageError("max_wall_seconds must be positive")


@dataclass(frozen=True)
class Progress:
    """What a backfill has done so far, as the stop-loss sees it."""

    done: int = 0
    failed: int = 0
    check_failures: int = 0
    reconciliation_mismatches: int = 0
    source_rows: int = 0
    elapsed_seconds: float = 0.0
    # the first blocking check that failed, `NAME: MESSAGE`: a halt names it
    failed_check: str | None = None


@dataclass(frozen=True)
class Trigger:
    """A stop-loss that fired, and at which partition."""

    name: str
    detail: str
    partition: str


def fired(stop_loss: StopLoss, progress: Progress, at: str) -> Trigger | None:
    """The first stop-loss condition `progress` meets, if any."""
    if stop_loss.halt_on_check_failure and progress.check_failures:
        return Trigger("check_failure", progress.failed_check or "a blocking check failed", at)
    if stop_loss.halt_on_reconciliation_mismatch and progress.reconciliation_mismatches:
        return Trigger("reconciliation_mismatch", "a reconciliation is beyond tolerance", at)
    if stop_loss.max_failures is not None and progress.failed >= stop_loss.max_failures:
        return Trigger("max_failures", f"{progress.failed} failed partition(s)", at)
    if stop_loss.max_failure_ratio is not None and progress.done:
        ratio = progress.failed / progress.done
        if progress.failed and ratio >= stop_loss.max_failure_ratio:
            return Trigger("max_failure_ratio", f"{ratio:.0%} of partitions failed", at)
    if stop_loss.max_source_rows is not None and progress.source_rows > stop_loss.max_source_rows:
        return Trigger("max_source_rows", f"{progress.source_rows} source rows read", at)
    if (
        stop_loss.max_wall_seconds is not None
        and progress.elapsed_seconds > stop_loss.max_wall_seconds
    ):
        return Trigger("max_wall_time", f"{progress.elapsed_seconds:.0f}s elapsed", at)
    return None


def parse_rate(text: str | None) -> int | None:
    """`N/min` → N batch starts per sliding minute."""
    if text is None:
        return None
    count, _, unit = text.partition("/")
    if unit not in ("min", "m") or not count.strip().isdigit() or int(count) < 1:
        raise UsageError(f"--rate {text!r}: expected N/min with N ≥ 1, e.g. 30/min")
    return int(count)


@dataclass(frozen=True)
class BackfillPlan:
    model: str
    version_id: str
    grain: Grain
    selection: tuple[tuple[int, int], ...]
    batch_size: int = 1
    max_concurrency: int = 1
    rate_per_minute: int | None = None
    stop_loss: StopLoss = field(default_factory=StopLoss)
    stale_only: bool = False
    requested: str = ""
    # a key range's chunk size (0 for the other grains)
    chunk_size: int = 0
    # an update model's transaction bounds, seconds (None: the model's declaration)
    lock_timeout: float | None = None
    statement_timeout: float | None = None
    # the adaptive throttle's latency bound, seconds (None: off)
    max_batch_latency: float | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise UsageError("--batch-size must be at least 1")
        if self.max_concurrency < 1:
            raise UsageError("--max-concurrency must be at least 1")

    @property
    def partitions(self) -> int:
        return sum(len(r) for r in self.ranges())

    def ranges(self) -> list[PartitionRange]:
        return IntervalSet(self.selection).ranges(self.grain, self.chunk_size)

    def batch_count(self, skip: IntervalSet | None = None) -> int:
        """How many batches `batches(skip)` yields, counted without making them."""
        remaining = IntervalSet(self.selection).minus(skip) if skip else IntervalSet(self.selection)
        ranges = remaining.ranges(self.grain, self.chunk_size)
        return sum(-(-len(r) // self.batch_size) for r in ranges)

    def batches(self, skip: IntervalSet | None = None) -> Iterator[PartitionRange]:
        """Consecutive runs of at most batch_size partitions, never spanning a gap.

        Lazy: a plan over a million partitions yields batches one at a time.
        """
        remaining = IntervalSet(self.selection).minus(skip) if skip else IntervalSet(self.selection)
        for start, end in remaining.intervals:
            cursor = start
            while cursor < end:
                batch_end = cursor
                for _ in range(self.batch_size):
                    if batch_end >= end:
                        break
                    batch_end = following(self.grain, batch_end, self.chunk_size)
                yield PartitionRange(self.grain, cursor, batch_end, self.chunk_size)
                cursor = batch_end

    def to_json(self) -> str:
        document = asdict(self)
        document["grain"] = self.grain.value
        # only when set: a plan of a time or key-list model reads as before key ranges came
        for optional in OPTIONAL_FIELDS:
            if not document[optional]:
                del document[optional]
        return json.dumps(document, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> BackfillPlan:
        data: dict[str, Any] = json.loads(text)
        return BackfillPlan(
            model=data["model"],
            version_id=data["version_id"],
            grain=Grain(data["grain"]),
            selection=tuple((int(s), int(e)) for s, e in data["selection"]),
            batch_size=data["batch_size"],
            max_concurrency=data["max_concurrency"],
            rate_per_minute=data["rate_per_minute"],
            stop_loss=StopLoss(**data["stop_loss"]),
            stale_only=data["stale_only"],
            requested=data["requested"],
            # plans recorded before key ranges have none of these
            chunk_size=data.get("chunk_size", 0),
            lock_timeout=data.get("lock_timeout"),
            statement_timeout=data.get("statement_timeout"),
            max_batch_latency=data.get("max_batch_latency"),
        )


def next_start_delay(starts: Sequence[float], now: float, rate_per_minute: int | None) -> float:
    """Seconds to wait before the next batch may start: at most `rate_per_minute` starts in any
    sliding 60-second window. `starts` are earlier start times, oldest first."""
    if rate_per_minute is None:
        return 0.0
    recent = [s for s in starts if s > now - RATE_WINDOW_SECONDS]
    if len(recent) < rate_per_minute:
        return 0.0
    return recent[-rate_per_minute] + RATE_WINDOW_SECONDS + RATE_MARGIN_SECONDS - now


def paced_seconds(batches: int, starts: Sequence[float], now: float, rate: int | None) -> float:
    """Seconds from `now` until the last of `batches` more batches may start under the sliding
    window of `rate` starts, given earlier `starts` (oldest first). Closed form: a future start
    waits for the one `rate` starts before it to leave the window, so each round of `rate`
    starts comes one window after the round before."""
    if rate is None or batches <= 0:
        return 0.0
    recent = [s for s in starts if s > now - RATE_WINDOW_SECONDS][-rate:]
    last = batches - 1
    rounds, place = divmod(last, rate)
    # the start the first-round one at `place` waits for, among the recent ones (none: free)
    waited = place - rate + len(recent)
    first = now if waited < 0 else max(now, recent[waited] + RATE_WINDOW_SECONDS)
    return first + rounds * RATE_WINDOW_SECONDS - now


def eta_seconds(
    unstarted_batches: int,
    remaining_partitions: int,
    done: int,
    elapsed: float,
    starts: Sequence[float],
    now: float,
    rate: int | None,
    batch_seconds: float | None,
) -> float:
    """Seconds until a run is done, the slower of two estimates: its measured pace so far, and
    the throttle's (the last batch's slot, and one batch time to run it). Either alone is wrong:
    the pace of a run that has not waited for a slot yet ignores the throttle, and the throttle
    ignores batches slower than their slots."""
    measured = remaining_partitions * elapsed / done if done else 0.0
    if rate is None or unstarted_batches <= 0:
        return measured
    paced = paced_seconds(unstarted_batches, starts, now, rate) + (batch_seconds or 0.0)
    return max(measured, paced)


def carried_starts(
    started_at: Iterable[datetime], wall_now: datetime, monotonic_now: float, rate: int | None
) -> tuple[float, ...]:
    """A run's recorded batch starts (wall times) still inside the rate's window, on the
    timer's clock: a resume continues the sliding window instead of beginning a new one. The
    partitions of a batch share its start, so each start counts once; a start recorded after
    `wall_now` (a clock set back) is not trusted."""
    if rate is None:
        return ()
    ages = sorted(
        {(wall_now - at).total_seconds() for at in started_at},
        reverse=True,
    )
    recent = [age for age in ages if 0 <= age < RATE_WINDOW_SECONDS][-rate:]
    return tuple(monotonic_now - age for age in recent)
