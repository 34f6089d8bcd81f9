"""Recording in the ledger the upstream partitions a run found diverged from the warehouse.

Each becomes an open `diverged` or `missing` mark (depth 0) on the attempt the ledger says
published it: every later reader is then blocked by the taint check until the partition is
republished whole, which clears the mark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import groupby

from tidegate.domain.clock import Clock, stamp
from tidegate.domain.ids import new_taint_id
from tidegate.domain.model import ModelSpec
from tidegate.domain.partitions import PartitionRange
from tidegate.domain.taint import Mark, MarkKind, Taint
from tidegate.execution.upstream_check import Divergence
from tidegate.state.base import StateStore

WAREHOUSE_KINDS = frozenset({MarkKind.DIVERGED, MarkKind.MISSING})


def mark_diverged(
    state: StateStore, clock: Clock, run_id: str, found: Sequence[Divergence]
) -> None:
    """Mark each upstream partition found, once: one that carries an open diverged or missing
    mark on the same attempt already is left as it is. Each upstream model and kind is one
    taint of the run (one ledger transaction)."""
    ordered = sorted(found, key=lambda d: (d.model, d.kind.value, d.start))
    for (model, kind), group in groupby(ordered, key=lambda d: (d.model, d.kind)):
        fresh = _unmarked(state, model, list(group))
        if not fresh:
            continue
        first = fresh[0]
        state.mark(
            Taint(
                taint_id=new_taint_id(),
                model=model,
                grain=first.grain,
                start=first.start,
                end=max(d.end for d in fresh),
                reason=f"{kind.label}: {first.cause}",
                actor="tidegate",
                at=stamp(clock),
                kind=kind,
                run_id=run_id,
            ),
            [Mark(model, d.start, d.end, d.attempt_id, 0) for d in fresh],
        )


def _unmarked(state: StateStore, model: str, found: list[Divergence]) -> list[Divergence]:
    marked = {
        (t.mark.start, t.mark.attempt_id)
        for t in state.open_taints(model, found[0].start, max(d.end for d in found))
        if t.kind in WAREHOUSE_KINDS
    }
    return [d for d in found if (d.start, d.attempt_id) not in marked]


def run_refusal(state: StateStore, run_id: str, spec_of: Callable[[str], ModelSpec]) -> str | None:
    """What a run found diverged from the warehouse and what to do, from the marks it recorded:
    a distributed run's workers each saw only their own batches."""
    found = [t for kind in sorted(WAREHOUSE_KINDS) for t in state.marks_of_run(run_id, kind)]
    if not found:
        return None
    first = found[0]
    model = spec_of(first.mark.model)
    mine = [t.mark for t in found if t.mark.model == model.name]
    span = PartitionRange(
        model.grain, min(m.start for m in mine), max(m.end for m in mine), model.chunk_size
    ).label(model.keys)
    return (
        f"upstream {first.kind.value}: {model.name} {span} ({first.reason}); "
        f"`tidegate verify {model.name}` compares the ledger with the warehouse, "
        f"`tidegate backfill {model.name} --partitions {span}` republishes it"
    )
