"""Live progress of a backfill: a rich progress bar on a terminal, plain lines otherwise,
nothing with --json (stdout holds the result document alone); JSON lines on the event stream
of --events."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tidegate.domain.attempt import AttemptState
from tidegate.domain.backfill import BackfillPlan, eta_seconds
from tidegate.domain.clock import SystemTimer, Timer
from tidegate.domain.partitions import Grain, PartitionKey, PartitionRange
from tidegate.domain.throttle import Adjustment
from tidegate.event_stream import EventStream
from tidegate.execution.executor import Outcome
from tidegate.terminal import echo

PLAIN_EVERY_SECONDS = 2.0
# batch times the ETA averages: recent ones, as a database's load changes over a long run
BATCH_TIMES_KEPT = 20
STOPPING = "stopping after in-flight batches (Ctrl-C again aborts them)"


@dataclass
class _Started:
    """A batch in flight: when it started, and how many of its partitions are still to come."""

    window: PartitionRange
    at: float
    left: int

    def holds(self, partition: PartitionKey) -> bool:
        return self.window.start <= partition.start < self.window.end


class BackfillProgress:
    """Counts outcomes and shows them; one instance per backfill command."""

    def __init__(
        self,
        quiet: bool,
        events: EventStream | None = None,
        verb: str = "backfilling",
        timer: Timer | None = None,
        on_run: Callable[[str], None] = lambda _: None,
    ) -> None:
        # --json: stdout is the result document's alone, nothing is shown
        self.quiet = quiet
        self.events = events
        self.verb = verb
        # told each run id as its run begins (a detached process hands the first one over)
        self.on_run = on_run
        self.tty = sys.stdout.isatty() and not quiet
        # the executor's timer: batch starts and rate waits are measured on the same clock
        self.timer = timer or SystemTimer()
        self.run_id = ""
        # the partitions the run will publish: None for a cursor run, whose batches are found
        # as it runs (how many is known only when the source's rows have been read)
        self.total: int | None = 0
        self.done = self.published = self.failed = self.skipped = self.rows = 0
        self.max_failures: int | None = None
        self.plan: BackfillPlan | None = None
        # published by the run before this process resumed it: counted in done and published
        self.before = 0
        self.began = self.timer.monotonic()
        self.unstarted_batches = 0
        self.starts: list[float] = []
        self.batch_times: list[float] = []
        self._in_flight: list[_Started] = []
        self._waiting: float | None = None
        self._stopping = False
        self._told_unclaimed = False
        self._last_line = 0.0
        self._bar: Any = None
        self._task: Any = None

    def start(self, run_id: str, plan: BackfillPlan) -> None:
        """A run begins, or its next model does (a recovery goes model by model)."""
        self.run_id, self.plan = run_id, plan
        self.total = None if plan.grain is Grain.CURSOR else plan.partitions
        self.done = self.published = self.failed = self.skipped = self.rows = self.before = 0
        self.max_failures = plan.stop_loss.max_failures
        self.began = self.timer.monotonic()
        # a cursor's batches are found as it runs: only their measured pace tells
        self.unstarted_batches = 0 if plan.grain is Grain.CURSOR else plan.batch_count()
        self.starts, self.batch_times, self._in_flight = [], [], []
        self._waiting = None
        self._told_unclaimed = False
        self.on_run(run_id)
        self._emit(
            {
                "event": "start",
                "run_id": run_id,
                "model": plan.model,
                "version_id": plan.version_id,
                "partitions": plan.partitions,
                "batch_size": plan.batch_size,
                "max_concurrency": plan.max_concurrency,
                "rate_per_minute": plan.rate_per_minute,
            }
        )
        if self.quiet:
            return
        if self.tty:
            from rich.progress import BarColumn, Progress, TextColumn

            from tidegate.render import console

            if self._bar is None:
                # render's console: the throttle's lines printed above the bar are escaped too
                # (the description, a model name and a run id, is an identifier's text)
                self._bar = Progress(
                    TextColumn("{task.description}", markup=False),
                    BarColumn(),
                    TextColumn("{task.fields[count]}"),
                    # the ETA is in the detail: rich's own would ignore the throttle
                    TextColumn("{task.fields[detail]}"),
                    console=console,
                )
                self._bar.start()
            self._task = self._bar.add_task(
                f"{plan.model} {run_id}", total=self.total, count=self._count(), detail=""
            )
        elif plan.grain is Grain.CURSOR:
            interval = PartitionRange(plan.grain, *plan.selection[0]).label()
            echo(f"{run_id}: {self.verb} the cursor interval {interval} of {plan.model}")
        else:
            echo(
                f"{run_id}: {self.verb} {plan.partitions} partition(s) of {plan.model} "
                f"in batches of {plan.batch_size}"
            )

    def resumed(self, published: int) -> None:
        """The run resumes with `published` of its partitions published before: progress
        counts the whole run, and so reaches 100% when it is done."""
        self.before = published
        self.done += published
        self.published += published
        if self.tty:
            self._bar.update(
                self._task, completed=self.done, count=self._count(), detail=self._detail()
            )
        elif not self.quiet:
            echo(f"{self.run_id}: {published}{self.of_total()} published before; resuming")

    def batch(self, _index: int, window: PartitionRange, at: float) -> None:
        """A batch started at `at` (the timer's time)."""
        self._waiting = None
        self.starts.append(at)
        # only the newest `rate` starts matter to the sliding window
        rate = self.plan.rate_per_minute if self.plan is not None else None
        del self.starts[: -(rate or 1)]
        self.unstarted_batches = max(0, self.unstarted_batches - 1)
        self._in_flight.append(_Started(window, at, len(window)))

    def waiting(self, seconds: float) -> None:
        """No batch starts for `seconds` more: the rate's window is full. Shown as it passes,
        a plain line every PLAIN_EVERY_SECONDS without a terminal."""
        self._waiting = seconds
        if self.tty:
            self._bar.update(self._task, detail=self._detail())
        elif not self.quiet:
            self._plain_line(force=False)

    def stopping(self) -> None:
        """The first Ctrl-C: shown where the progress is — on the bar, or as a progress line —
        so that the run's one message on stderr is the summary it ends with."""
        if self.quiet:
            return
        self._stopping = True
        if self._bar is not None:
            self._bar.update(self._task, detail=self._detail())
        elif self.run_id:
            self._plain_line(force=True)
        else:
            echo(STOPPING)

    def unclaimed(self, batches: int, waited: float, threshold: float) -> None:
        """A distributed run's queued batches wait for a worker's first claim, `waited`
        seconds so far: said once when the wait passes `threshold`, then kept visible (a plain
        line every PLAIN_EVERY_SECONDS without a terminal) so that the wait reads as alive."""
        if self.quiet:
            return
        hint = "start one with: tidegate worker"
        if not self._told_unclaimed:
            self._told_unclaimed = True
            told = (
                f"queued {batches} batches of {self.run_id}; waiting for a worker — none has "
                f"claimed a batch for {threshold:g} s ({hint})"
            )
            if self.tty:
                self._bar.console.print(told, markup=False, highlight=False)
            else:
                echo(told)
                self._last_line = self.timer.monotonic()
            return
        detail = f"waiting for a worker for {waited:,.0f}s ({hint})"
        if self.tty:
            self._bar.update(self._task, detail=detail)
        elif self.timer.monotonic() - self._last_line >= PLAIN_EVERY_SECONDS:
            self._last_line = self.timer.monotonic()
            echo(f"{self.run_id}: {self._count()} partitions, {detail}")

    def outcome(self, outcome: Outcome) -> None:
        self.done += 1
        self._settled(outcome.partition)
        if outcome.state is AttemptState.PUBLISHED:
            self.published += 1
            self.rows += outcome.rows or 0
        elif outcome.state is AttemptState.FAILED:
            self.failed += 1
        else:
            self.skipped += 1
        self._emit(
            {
                "event": "partition",
                "run_id": self.run_id,
                "model": outcome.model,
                "partition": outcome.label,
                "state": outcome.state.value,
                "attempt_id": outcome.attempt_id,
                "rows": outcome.rows,
                "checksum": outcome.checksum,
                "reason": outcome.reason,
            }
        )
        if self.quiet:
            return
        if self.tty:
            self._bar.update(
                self._task, completed=self.done, count=self._count(), detail=self._detail()
            )
        else:
            self._plain_line(force=self.done == self.total)

    def _plain_line(self, force: bool) -> None:
        now = self.timer.monotonic()
        if force or now - self._last_line >= PLAIN_EVERY_SECONDS:
            self._last_line = now
            echo(f"{self.run_id}: {self._count()} partitions, {self._detail()}")

    def _count(self) -> str:
        return str(self.done) if self.total is None else f"{self.done}/{self.total}"

    def of_total(self) -> str:
        """' of N' partitions, where the run knows how many it has."""
        return "" if self.total is None else f" of {self.total}"

    def _settled(self, partition: PartitionKey) -> None:
        for started in self._in_flight:
            if started.holds(partition):
                started.left -= 1
                if started.left <= 0:
                    self._in_flight.remove(started)
                    self.batch_times.append(self.timer.monotonic() - started.at)
                    del self.batch_times[:-BATCH_TIMES_KEPT]
                return

    def eta(self) -> float:
        """Seconds until the run is done, from the throttle and the measured pace."""
        now = self.timer.monotonic()
        # without batch starts reported (a distributed run's workers keep the rate), the
        # measured pace alone
        rate = self.plan.rate_per_minute if self.plan is not None and self.starts else None
        return eta_seconds(
            unstarted_batches=self.unstarted_batches,
            remaining_partitions=0 if self.total is None else self.total - self.done,
            # the pace is this process's: what was published before took no time of it
            done=self.done - self.before,
            elapsed=max(now - self.began, 1e-6),
            starts=self.starts,
            now=now,
            rate=rate,
            batch_seconds=sum(self.batch_times) / len(self.batch_times)
            if self.batch_times
            else None,
        )

    def throttle(self, adjustment: Adjustment) -> None:
        """The adaptive throttle changed its rate: say so, and why."""
        self._emit(
            {
                "event": "throttle",
                "run_id": self.run_id,
                "batch": adjustment.batch,
                "latency_seconds": round(adjustment.latency_seconds, 3),
                "rate_before": adjustment.rate_before,
                "rate_after": adjustment.rate_after,
                "reason": adjustment.reason,
            }
        )
        if self.quiet:
            return
        if self.tty:
            self._bar.console.print(f"throttle: {adjustment.reason}")
        else:
            echo(f"{self.run_id}: throttle: {adjustment.reason}")

    def _detail(self) -> str:
        elapsed = max(self.timer.monotonic() - self.began, 1e-6)
        limit = f"/{self.max_failures}" if self.max_failures else ""
        waiting = (
            ""
            if self._waiting is None
            else f"waiting for a rate slot, next in {math.ceil(self._waiting):,}s, "
        )
        if self._stopping:
            waiting = f"{STOPPING}, "
        return (
            f"{waiting}{self.rows / elapsed:,.0f} rows/s, ETA {self.eta():,.0f}s, "
            f"failed {self.failed}{limit}, skipped {self.skipped}"
        )

    def end(self, document: dict[str, Any]) -> None:
        """The run's result (`document`, the fields of its result document)."""
        if self._bar is not None:
            self._bar.stop()
        self._emit({"event": "end", **document})

    def _emit(self, event: dict[str, Any]) -> None:
        if self.events is not None:
            self.events.write({"schema": "tidegate.backfill-event/v1", **event})
