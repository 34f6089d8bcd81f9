"""Telling the world what a command did: OpenLineage run events (START when a run begins,
COMPLETE or FAIL when it ends) to the lineage targets, and notices to each registered consumer
of a model — `published`, `taint` and `reread` — through the ledger's outbox.

A consumer that acknowledges reads by notification has consumed a partition once the notice
telling it of the partition is delivered; the notice and that read are queued together.
Announcing never fails a command: what cannot be delivered now stays in the outbox and goes
out with a later command or `tidegate deliver`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from tidegate.domain.attempt import AttemptState
from tidegate.domain.checks import CheckResult
from tidegate.domain.model import ModelSpec
from tidegate.domain.partitions import IntervalSet
from tidegate.domain.run import Attempt
from tidegate.domain.taint import MarkKind, TaintedPartition, ranges_by_model
from tidegate.notify.config import consumers_of, lineage_targets
from tidegate.notify.lineage_names import Naming
from tidegate.notify.outbox import DeliveryReport, deliver, enqueue, payloads
from tidegate.notify.row import ConsumerRead
from tidegate.ops.context import Context

if TYPE_CHECKING:
    from tidegate.notify.events import Assertion, DatasetRef, LineageState, NoticeKind

Windows = Sequence[tuple[int, int]]


@dataclass(frozen=True)
class Published:
    """What one model's part of a run did."""

    model: str
    version: str  # vN
    failed: bool
    reason: str | None
    stopped: bool = False  # on request, before it was done

    @property
    def lineage_state(self) -> LineageState:
        return "ABORT" if self.stopped else "FAIL" if self.failed else "COMPLETE"


class _Queue:
    """Entries for the outbox, with the consumer reads each one tells of."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, Mapping[str, Any]]] = []
        self.reads: dict[int, list[ConsumerRead]] = {}

    def add(
        self, target: str, document: Mapping[str, Any], reads: Sequence[ConsumerRead] = ()
    ) -> None:
        if reads:
            self.reads[len(self.entries)] = list(reads)
        self.entries.append((target, document))


def announce_start(ctx: Context, run_id: str, models: Sequence[str]) -> None:
    """Queue the START event of each model of a run that begins (delivered with its end)."""
    settings = ctx.project.settings
    targets = lineage_targets(settings.notify)
    if not targets:
        return
    from tidegate.notify.events import parent_from, run_event  # loads openlineage

    at = ctx.clock.now()
    queue = _Queue()
    for model in models:
        event = run_event(
            "START",
            namespace=settings.project.name,
            model=model,
            run_id=run_id,
            at=at,
            parent=parent_from(os.environ),
        )
        for target in targets:
            queue.add(target, event)
    _enqueue(ctx, queue)


def announce(ctx: Context, run_id: str, done: Sequence[Published]) -> list[str]:
    """Queue the events and notices of a finished run — what it published, and the tainted
    partitions it fixed (to re-read) — and deliver what can be; notes for the user. Nothing
    happens in a project without `[[notify]]` targets."""
    stale = ctx.state.marks_of_run(run_id, MarkKind.STALE)
    notes = stale_notes(ctx, stale)
    settings = ctx.project.settings
    if not settings.notify:
        return notes
    from tidegate.notify.events import notice, parent_from, run_event  # loads openlineage

    at = ctx.clock.now()
    queue = _Queue()
    targets = lineage_targets(settings.notify)
    attempts = ctx.state.attempts_of_run(run_id) if targets else []
    checks = ctx.state.checks_of_run(run_id) if targets else {}
    for part in done:
        spec = ctx.project.model(part.model)
        windows = ctx.state.run_checkpoints(run_id, part.model)
        shown = labels(ctx, part.model, windows)
        if targets:
            event = run_event(
                part.lineage_state,
                namespace=settings.project.name,
                model=part.model,
                run_id=run_id,
                at=at,
                inputs=lineage_inputs(ctx, spec),
                outputs=[lineage_output(ctx, spec, part.version, shown, attempts, checks)],
                error=part.reason if part.failed or part.stopped else None,
                nominal=nominal_time(spec, windows),
                parent=parent_from(os.environ),
            )
            for target in targets:
                queue.add(target, event)
        if shown:
            told = notice(
                "published", model=part.model, partitions=shown, reason=None, run_id=run_id, at=at
            )
            for consumer in consumers_of(settings.consumers, part.model):
                counted = [
                    ConsumerRead(consumer.name, part.model, start, end) for start, end in windows
                ]
                queue.add(consumer.notify, told, counted if consumer.ack == "notified" else ())
    fixed: dict[str, list[tuple[int, int]]] = {}
    for model, start, end in ctx.state.cleared_by_run(run_id):
        fixed.setdefault(model, []).append((start, end))
    for model, recomputed in fixed.items():
        _tell(ctx, queue, "reread", model, recomputed, "recomputed; read it again", run_id)
    for model, windows in ranges_by_model([t.mark for t in stale]).items():
        _tell(ctx, queue, "changed", model, windows, STALE_REASON, run_id)
    _enqueue(ctx, queue)
    return notes + describe(flush(ctx))


def lineage_inputs(ctx: Context, spec: ModelSpec) -> list[DatasetRef]:
    """The datasets a model reads, named as OpenLineage names them."""
    from tidegate.notify.events import DatasetRef

    naming = Naming(ctx.project.root, ctx.project.settings.warehouse)
    names = [naming.source(ctx.project.sources[s]) for s in spec.sources]
    names += [naming.model(ctx.project.model(u).published_table) for u in spec.upstream]
    return [DatasetRef(n.namespace, n.name, symlink=n.symlink, storage=n.storage) for n in names]


def lineage_output(
    ctx: Context,
    spec: ModelSpec,
    version: str,
    shown: Sequence[str],
    attempts: Sequence[Attempt],
    checks: Mapping[str, Sequence[CheckResult]],
) -> DatasetRef:
    """The table a model's part of a run wrote: the partitions, the rows published, the
    columns and how its checks went (`checks`: the run's, by attempt)."""
    from tidegate.notify.events import DatasetRef

    name = Naming(ctx.project.root, ctx.project.settings.warehouse).model(spec.published_table)
    own = [a for a in attempts if a.model == spec.name]
    published = [a for a in own if a.state is AttemptState.PUBLISHED]
    return DatasetRef(
        name.namespace,
        name.name,
        tuple(shown),
        version,
        partition_column=spec.partition_column,
        rows=sum(a.rows or 0 for a in published) if published else None,
        columns=tuple((c.name, c.type) for c in spec.columns),
        assertions=assertions(spec, own, checks),
        symlink=name.symlink,
        storage=name.storage,
    )


def assertions(
    spec: ModelSpec, attempts: Sequence[Attempt], checks: Mapping[str, Sequence[CheckResult]]
) -> tuple[Assertion, ...]:
    """Each check a model's attempts ran (`checks`: by attempt): passed in all of them, or
    not."""
    from tidegate.notify.events import Assertion

    found: dict[str, list[CheckResult]] = {}
    for attempt in attempts:
        for result in checks.get(attempt.attempt_id, ()):
            found.setdefault(result.name, []).append(result)
    declared = {check.name: check for check in spec.checks}
    outcomes = []
    for name, results in found.items():
        failed = [r for r in results if not r.passed]
        column = declared[name].params.get("column") if name in declared else None
        outcomes.append(
            Assertion(
                name=name,
                kind=results[0].kind,
                success=not failed,
                severity=results[0].severity.value,
                column=column if isinstance(column, str) else None,
                detail=failed[0].message if failed else None,
            )
        )
    return tuple(outcomes)


def nominal_time(spec: ModelSpec, windows: Windows) -> tuple[datetime, datetime] | None:
    """The span of time a run's windows of a time-grain model cover (None for other models)."""
    if not windows or not spec.grain.is_time:
        return None
    start, end = min(s for s, _ in windows), max(e for _, e in windows)
    return (
        datetime.fromtimestamp(start, tz=timezone.utc),
        datetime.fromtimestamp(end, tz=timezone.utc),
    )


STALE_REASON = "an upstream partition it was computed from changed; a `reread` follows"


def stale_notes(ctx: Context, stale: Sequence[TaintedPartition]) -> list[str]:
    """What a run's publishes left stale downstream, and the commands that recompute it: one
    recovery per model reached first (each takes what was built from it along), upstream
    first."""
    if not stale:
        return []
    grouped: dict[str, list[TaintedPartition]] = {}
    for marked in stale:
        grouped.setdefault(marked.mark.model, []).append(marked)
    notes = [
        f"upstream changed: {sum(len(labels(ctx, m, _spans(g))) for m, g in grouped.items())} "
        "downstream range(s) are stale until recomputed:"
    ]
    for model, marks in grouped.items():
        for label in labels(ctx, model, _spans(marks)):
            notes.append(f"  {model} {label}")
    for model, span in recoveries(ctx, stale):
        notes.append(f"recompute: tidegate recover {model} --partitions {span}")
    return notes


def recoveries(ctx: Context, stale: Sequence[TaintedPartition]) -> list[tuple[str, str]]:
    """(model, range) of the recoveries that recompute `stale`: one per model reached first
    (depth 1; each takes what was built from it along), upstream first, over the span covering
    its marked partitions (recover takes the marked partitions of one range)."""
    first: dict[str, list[tuple[int, int]]] = {}
    for marked in stale:
        if marked.mark.depth == 1:
            first.setdefault(marked.mark.model, []).append((marked.mark.start, marked.mark.end))
    found = []
    for model in (m for m in ctx.project.order if m in first):
        spec = ctx.project.model(model)
        spans = first[model]
        span = spec.span(min(s for s, _ in spans), max(e for _, e in spans))
        found.append((model, span.label(spec.keys)))
    return found


def _spans(marks: Sequence[TaintedPartition]) -> list[tuple[int, int]]:
    return [(t.mark.start, t.mark.end) for t in marks]


def notices(
    ctx: Context,
    kind: NoticeKind,
    affected: Mapping[str, Windows],
    reason: str,
    run_id: str | None,
) -> list[tuple[str, str]]:
    """A `taint` or `reread` notice for each consumer of each affected model, with exactly
    that model's affected partitions: (target, payload) rows for the outbox."""
    if not ctx.project.settings.notify:
        return []
    queue = _Queue()
    for model, windows in affected.items():
        _tell(ctx, queue, kind, model, windows, reason, run_id)
    return payloads(queue.entries)


def notified(ctx: Context, models: Sequence[str]) -> list[str]:
    """The consumers registered for any of `models`."""
    consumers = ctx.project.settings.consumers
    return sorted({c.name for model in models for c in consumers_of(consumers, model)})


def _tell(
    ctx: Context,
    queue: _Queue,
    kind: NoticeKind,
    model: str,
    windows: Windows,
    reason: str,
    run_id: str | None,
) -> None:
    from tidegate.notify.events import notice  # loads openlineage

    consumers = consumers_of(ctx.project.settings.consumers, model)
    if not consumers or not windows or model not in ctx.project.models:
        return
    document = notice(
        kind,
        model=model,
        partitions=labels(ctx, model, windows),
        reason=reason,
        run_id=run_id,
        at=ctx.clock.now(),
    )
    for consumer in consumers:
        queue.add(consumer.notify, document)


def labels(ctx: Context, model: str, windows: Windows) -> tuple[str, ...]:
    """Windows of a model as range labels (a year of days is one label)."""
    spec = ctx.project.model(model)
    merged = IntervalSet.of(list(windows)).intervals
    return tuple(spec.span(start, end).label(spec.keys) for start, end in merged)


def _enqueue(ctx: Context, queue: _Queue) -> None:
    if queue.entries:
        enqueue(ctx.state, queue.entries, ctx.clock, queue.reads)


def flush(ctx: Context) -> DeliveryReport:
    """Deliver every due row of the outbox."""
    # HTTP delivery (urllib, ssl, email) loads only where something is delivered
    from tidegate.notify.targets import Dispatcher

    settings = ctx.project.settings
    return deliver(ctx.state, settings.notify, ctx.clock, Dispatcher(ctx.project.root))


def describe(report: DeliveryReport) -> list[str]:
    notes = [f"delivered {len(report.delivered)} notification(s)"] if report.delivered else []
    notes += [
        f"notification to {f.target} kept in the outbox ({f.error}); next try {f.next_attempt_at}"
        for f in report.failures
    ]
    return notes
