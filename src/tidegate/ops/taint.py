"""Taint and ack: mark contaminated partitions and everything built from them, and record what
external consumers have read.

Both write only the ledger (and the outbox): they never open the warehouse, so they work while
a writer runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tidegate.domain.attempt import AttemptState
from tidegate.domain.clock import stamp
from tidegate.domain.errors import UsageError
from tidegate.domain.graph import downstream_of
from tidegate.domain.ids import new_taint_id
from tidegate.domain.partitions import PartitionRange
from tidegate.domain.taint import Mark, Taint, ranges_by_model
from tidegate.execution.executor import Outcome
from tidegate.ops.announce import describe, flush, labels, notices, notified
from tidegate.ops.context import Context
from tidegate.state.base import Event, Told


@dataclass(frozen=True)
class Tainted:
    taint: Taint
    marks: tuple[Mark, ...]
    consumers: tuple[str, ...]  # told of their affected partitions
    notes: tuple[str, ...]

    def by_model(self) -> dict[str, list[tuple[int, int]]]:
        return ranges_by_model(self.marks)


def taint(ctx: Context, model: str, partitions: str, reason: str) -> Tainted:
    """Mark the published partitions of `model` in `partitions` and, through lineage, every
    downstream partition that read them; tell each affected consumer its partitions."""
    spec = ctx.project.model(model)
    if spec.update is not None:
        raise UsageError(
            f"{model} is an update model: its table is written by the application too, so "
            "tidegate cannot tell its rows apart; fix them with a backfill of the range"
        )
    if not reason.strip():
        raise UsageError("--reason must say why the partitions are contaminated")
    chosen = spec.parse_range(partitions)
    upstream = {name: ctx.project.model(name).upstream for name in ctx.project.order}
    order = downstream_of(upstream, model)
    declared = Taint(
        taint_id=new_taint_id(),
        model=model,
        grain=spec.grain.value,
        start=chosen.start,
        end=chosen.end,
        reason=reason,
        actor=ctx.actor,
        at=stamp(ctx.clock),
    )

    def tell(marks: Sequence[Mark]) -> Told:
        affected = ranges_by_model(marks)
        reached = {m: list(labels(ctx, m, w)) for m, w in affected.items()}
        event = Event(
            kind="taint",
            actor=ctx.actor,
            at=declared.at,
            model=model,
            reason=reason,
            detail={
                "taint_id": declared.taint_id,
                "partitions": partitions,
                "reached": reached,
            },
        )
        # a downstream model's own history shows why its partitions are tainted, without
        # knowing which upstream model to look at
        downstream = [
            Event(
                kind="tainted_downstream",
                actor=ctx.actor,
                at=declared.at,
                model=name,
                reason=reason,
                detail={
                    "taint_id": declared.taint_id,
                    "origin": model,
                    "origin_partitions": reached.get(model, []),
                    "partitions": ranges,
                },
            )
            for name, ranges in reached.items()
            if name != model
        ]
        return Told(event, notices(ctx, "taint", affected, reason, None), downstream)

    marks = ctx.state.taint(declared, order, {m: upstream[m] for m in order}, tell)
    if not marks:
        raise UsageError(f"nothing to taint: no partition of {model} in {partitions} is published")
    affected = ranges_by_model(marks)
    notes = describe(flush(ctx)) if ctx.project.settings.notify else []
    return Tainted(declared, tuple(marks), tuple(notified(ctx, list(affected))), tuple(notes))


def ack(ctx: Context, consumer: str, model: str, partitions: str) -> PartitionRange:
    """Record that `consumer` has read `partitions` of `model`."""
    spec = ctx.project.model(model)
    registered = [c for c in ctx.project.settings.consumers if c.model == model]
    if consumer not in {c.name for c in registered}:
        known = ", ".join(sorted(c.name for c in registered)) or "none"
        raise UsageError(
            f"{consumer!r} is not a registered consumer of {model} (registered: {known})"
        )
    chosen = spec.parse_range(partitions)
    ctx.state.record_reads(consumer, model, [(chosen.start, chosen.end)], stamp(ctx.clock))
    return chosen


def tainted_outcomes(ctx: Context, outcomes: Sequence[Outcome]) -> list[str]:
    """Notes on partitions a run published from tainted input (`[taint] downstream = "warn"`):
    they carry the taint too."""
    models = {o.model for o in outcomes if o.state is AttemptState.PUBLISHED}
    marked = {t.mark.attempt_id: t for m in sorted(models) for t in ctx.state.open_taints(m)}
    return [
        f"{o.model} {o.label}: published from tainted input, so tainted too "
        f"({marked[o.attempt_id].reason}; `tidegate recover {marked[o.attempt_id].origin}`)"
        for o in outcomes
        if o.attempt_id in marked
    ]
