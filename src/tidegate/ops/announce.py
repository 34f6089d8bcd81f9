"""Telling the world what a command published: OpenLineage run events to the lineage targets,
`published` notices to each registered consumer of a model, through the ledger's outbox.

Announcing never fails a command: what cannot be delivered now stays in the outbox and goes
out with a later command or `tidegate deliver`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tidegate.domain.partitions import PartitionRange
from tidegate.notify.config import consumers_of, lineage_targets
from tidegate.notify.outbox import DeliveryReport, deliver, enqueue
from tidegate.notify.targets import Dispatcher
from tidegate.ops.context import Context


@dataclass(frozen=True)
class Published:
    """What one model's part of a run did."""

    model: str
    version: str  # vN
    partitions: tuple[str, ...]  # published
    failed: bool
    reason: str | None


def announce(ctx: Context, run_id: str, done: Sequence[Published]) -> list[str]:
    """Queue the events and notices of a finished run, deliver what can be; notes for the
    user. Nothing happens in a project without `[[notify]]` targets."""
    settings = ctx.project.settings
    if not settings.notify:
        return []
    from tidegate.notify.events import DatasetRef, notice, run_event  # loads openlineage

    namespace = settings.project.name
    at = ctx.clock.now()
    entries: list[tuple[str, Mapping[str, object]]] = []
    for part in done:
        spec = ctx.project.model(part.model)
        reads = [DatasetRef(namespace, ctx.project.sources[s].table) for s in spec.sources]
        reads += [DatasetRef(namespace, upstream) for upstream in spec.upstream]
        wrote = DatasetRef(namespace, part.model, part.partitions, part.version)
        event = run_event(
            "FAIL" if part.failed else "COMPLETE",
            namespace=namespace,
            model=part.model,
            run_id=run_id,
            at=at,
            inputs=reads,
            outputs=[wrote],
            error=part.reason if part.failed else None,
        )
        entries += [(target, event) for target in lineage_targets(settings.notify)]
        if part.partitions:
            told = notice(
                "published",
                model=part.model,
                partitions=part.partitions,
                reason=None,
                run_id=run_id,
                at=at,
            )
            entries += [(c.notify, told) for c in consumers_of(settings.consumers, part.model)]
    if entries:
        enqueue(ctx.state, entries, ctx.clock)
    return describe(flush(ctx))


def published_ranges(ctx: Context, run_id: str, model: str) -> tuple[str, ...]:
    """What a run published of a model, as ranges (a year of days is one label)."""
    spec = ctx.project.model(model)
    return tuple(
        PartitionRange(spec.grain, start, end).label(spec.keys)
        for start, end in ctx.state.run_checkpoints(run_id)
    )


def flush(ctx: Context) -> DeliveryReport:
    """Deliver every due row of the outbox."""
    settings = ctx.project.settings
    return deliver(ctx.state, settings.notify, ctx.clock, Dispatcher(ctx.project.root))


def describe(report: DeliveryReport) -> list[str]:
    notes = [f"delivered {len(report.delivered)} notification(s)"] if report.delivered else []
    notes += [
        f"notification to {f.target} kept in the outbox ({f.error}); next try {f.next_attempt_at}"
        for f in report.failures
    ]
    return notes
