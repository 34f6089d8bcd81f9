"""Live progress of a backfill: a rich progress bar on a terminal, plain lines otherwise,
JSON lines with --json."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from tidegate.domain.attempt import AttemptState
from tidegate.domain.backfill import BackfillPlan
from tidegate.domain.partitions import Grain, PartitionRange
from tidegate.domain.throttle import Adjustment
from tidegate.execution.executor import Outcome
from tidegate.terminal import echo

PLAIN_EVERY_SECONDS = 2.0


class BackfillProgress:
    """Counts outcomes and shows them; one instance per backfill command."""

    def __init__(self, as_json: bool, verb: str = "backfilling") -> None:
        self.as_json = as_json
        self.verb = verb
        self.tty = sys.stdout.isatty() and not as_json
        self.run_id = ""
        self.total = 0
        self.done = self.published = self.failed = self.skipped = self.rows = 0
        self.max_failures: int | None = None
        self.began = time.monotonic()
        self._last_line = 0.0
        self._bar: Any = None
        self._task: Any = None

    def start(self, run_id: str, plan: BackfillPlan) -> None:
        """A run begins, or its next model does (a recovery goes model by model)."""
        self.run_id, self.total = run_id, plan.partitions
        self.done = self.published = self.failed = self.skipped = self.rows = 0
        self.max_failures = plan.stop_loss.max_failures
        self.began = time.monotonic()
        if self.as_json:
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
        elif self.tty:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            from tidegate.render import console

            if self._bar is None:
                # render's console: the throttle's lines printed above the bar are escaped too
                # (the description, a model name and a run id, is an identifier's text)
                self._bar = Progress(
                    TextColumn("{task.description}", markup=False),
                    BarColumn(),
                    TextColumn("{task.completed}/{task.total}"),
                    TextColumn("{task.fields[detail]}"),
                    TimeRemainingColumn(),
                    console=console,
                )
                self._bar.start()
            self._task = self._bar.add_task(f"{plan.model} {run_id}", total=self.total, detail="")
        elif plan.grain is Grain.CURSOR:
            interval = PartitionRange(plan.grain, *plan.selection[0]).label()
            echo(f"{run_id}: {self.verb} the cursor interval {interval} of {plan.model}")
        else:
            echo(
                f"{run_id}: {self.verb} {plan.partitions} partition(s) of {plan.model} "
                f"in batches of {plan.batch_size}"
            )

    def outcome(self, outcome: Outcome) -> None:
        self.done += 1
        if outcome.state is AttemptState.PUBLISHED:
            self.published += 1
            self.rows += outcome.rows or 0
        elif outcome.state is AttemptState.FAILED:
            self.failed += 1
        else:
            self.skipped += 1
        if self.as_json:
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
        elif self.tty:
            self._bar.update(self._task, completed=self.done, detail=self._detail())
        elif self.done == self.total or time.monotonic() - self._last_line >= PLAIN_EVERY_SECONDS:
            self._last_line = time.monotonic()
            echo(f"{self.run_id}: {self.done}/{self.total} partitions, {self._detail()}")

    def throttle(self, adjustment: Adjustment) -> None:
        """The adaptive throttle changed its rate: say so, and why."""
        if self.as_json:
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
        elif self.tty:
            self._bar.console.print(f"throttle: {adjustment.reason}")
        else:
            echo(f"{self.run_id}: throttle: {adjustment.reason}")

    def _detail(self) -> str:
        elapsed = max(time.monotonic() - self.began, 1e-6)
        remaining = (self.total - self.done) * elapsed / self.done if self.done else 0
        limit = f"/{self.max_failures}" if self.max_failures else ""
        return (
            f"{self.rows / elapsed:,.0f} rows/s, ETA {remaining:,.0f}s, "
            f"failed {self.failed}{limit}, skipped {self.skipped}"
        )

    def end(self, document: dict[str, Any]) -> None:
        if self._bar is not None:
            self._bar.stop()
        if self.as_json:
            self._emit({"event": "end", **document})

    def _emit(self, event: dict[str, Any]) -> None:
        click.echo(json.dumps({"schema": "tidegate.backfill-event/v1", **event}, default=str))
