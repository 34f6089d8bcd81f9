"""Cascade: recompute, in the same operation, what a run's publishes left stale downstream.

A rerun or backfill with `--cascade` first does its own work; then each model its publishes
reached first (depth 1) is recovered — with the run's batching and concurrency — and each
recovery takes along what was built from it, upstream first. Replacing partitions a consumer
read needs an approval, as a rerun of them would: that is judged before anything is touched,
from the lineage of what the operation is about to replace.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tidegate.domain.attempt import RunStatus
from tidegate.domain.backfill import BackfillPlan
from tidegate.domain.errors import RefusedError
from tidegate.domain.graph import downstream_of
from tidegate.domain.partitions import IntervalSet
from tidegate.domain.taint import MarkKind
from tidegate.execution.executor import Outcome
from tidegate.ops import recover
from tidegate.ops.announce import recoveries
from tidegate.ops.context import Context

# a rerun's cascade recovers in batches of this size, as `recover` does by default
DEFAULT_BATCH_SIZE = recover.DEFAULT_BATCH_SIZE


@dataclass(frozen=True)
class Cascade:
    """The recoveries a cascade ran, in order; the first that did not succeed ends it."""

    results: tuple[recover.Result, ...]

    @property
    def status(self) -> RunStatus:
        for result in self.results:
            if result.status is not RunStatus.SUCCEEDED:
                return result.status
        return RunStatus.SUCCEEDED

    def document(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "runs": [r.run_id for r in self.results],
            "steps": [
                {
                    "model": step.model,
                    "run_id": result.run_id,
                    "partitions": step.partitions,
                    "status": result.status.value,
                }
                for result in self.results
                for step in result.plan.steps
            ],
        }


def requests(ctx: Context, run_id: str, batch_size: int, concurrency: int) -> list[recover.Request]:
    """One recovery per model the run's publishes left stale first, upstream first."""
    stale = ctx.state.marks_of_run(run_id, MarkKind.STALE)
    return [
        recover.Request(model, span, batch_size, concurrency)
        for model, span in recoveries(ctx, stale)
    ]


def run(
    ctx: Context,
    run_id: str,
    batch_size: int,
    concurrency: int,
    stop_flag: threading.Event,
    on_outcome: Callable[[Outcome], None],
    on_step: Callable[[str, BackfillPlan], None],
) -> Cascade:
    results: list[recover.Result] = []
    for request in requests(ctx, run_id, batch_size, concurrency):
        # an earlier recovery of this cascade may have recomputed this model's marks already
        if not ctx.state.open_taints(request.model):
            continue
        result = recover.start(ctx, request, stop_flag, on_outcome, on_step)
        results.append(result)
        if result.status is not RunStatus.SUCCEEDED:
            break
    return Cascade(tuple(results))


def refuse_unapproved(
    ctx: Context, model: str, windows: Sequence[tuple[int, int]], approval: str | None
) -> None:
    """Refuse (exit 3) a cascade from `windows` of `model` that would replace partitions a
    registered consumer read, unless it is approved."""
    if approval is not None and approval.strip():
        return
    read = consumed_below(ctx, model, windows)
    if read:
        shown = "; ".join(f"{consumer}: {', '.join(parts)}" for consumer, parts in read.items())
        raise RefusedError(
            f"--cascade would replace partitions consumers read ({shown}); "
            'approve it with --approve "reason", or drop --cascade'
        )


def consumed_below(
    ctx: Context, model: str, windows: Sequence[tuple[int, int]]
) -> dict[str, list[str]]:
    """Per consumer: the partitions downstream of `windows` of `model` (through the recorded
    lineage, however deep) that it has read."""
    upstream = {name: ctx.project.model(name).upstream for name in ctx.project.order}
    reached: dict[str, list[tuple[int, int]]] = {model: list(windows)}
    read: dict[str, list[str]] = {}
    for below in downstream_of(upstream, model):
        spans = [
            (r.start, r.end)
            for parent in upstream[below]
            if reached.get(parent)
            for r in ctx.state.readers(below, parent, reached[parent])
        ]
        if not spans:
            continue
        reached[below] = list(IntervalSet.of(spans).intervals)
        spec = ctx.project.model(below)
        for start, end in reached[below]:
            for partition, consumers in ctx.state.consumed(below, start, end).items():
                label = spec.span(partition, end).first().label(spec.keys)
                for consumer in consumers:
                    read.setdefault(consumer, []).append(f"{below} {label}")
    return read
