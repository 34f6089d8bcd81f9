"""The ledger against the warehouse's commit markers: what diverged, and its marks.

`verify` compares every published partition; a writer, when it starts, compares only what a
cheap look says may have diverged: a model whose table is gone, or whose newest published
attempt has no marker any more (a warehouse restored from an older copy lost it). What
diverged is marked `missing` or `diverged` in the ledger, once — a partition already carrying
an open mark of the same kind is left as it is — so that nothing is built on it or shown green
until it is republished (`backfill --stale-only`). Nothing in the warehouse is touched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tidegate.domain.ids import new_taint_id
from tidegate.domain.taint import Mark, MarkKind, Taint
from tidegate.domain.verify import Finding, Recorded, compare
from tidegate.engines.base import EVERY, CommitMarker, Engine, MarkerReader
from tidegate.project.loader import Project
from tidegate.state.base import Event, StateStore, Told


@dataclass(frozen=True)
class Marked:
    """The marks recorded for one model and kind."""

    model: str
    kind: MarkKind
    taint_id: str | None  # None: every partition carried an open mark of that kind already
    marked: int
    already: int


@dataclass(frozen=True)
class Comparison:
    """One model's published partitions in a range against its markers."""

    recorded: tuple[Recorded, ...]
    writers: Mapping[int, str]  # partition start → the version that published it
    markers: tuple[CommitMarker, ...]
    table_exists: bool

    def findings(self, model: str, measured: Mapping[int, str] | None = None) -> list[Finding]:
        marked: dict[int, list[str]] = {}
        for marker in self.markers:
            marked.setdefault(marker.partition_start, []).append(marker.attempt_id)
        return compare(model, self.recorded, self.table_exists, marked, measured)


def compare_model(
    state: StateStore,
    warehouse: MarkerReader,
    model: str,
    start: int,
    end: int,
    table_exists: bool,
) -> Comparison:
    rows = [p for p in state.partitions(model, start, end) if p.attempt_id is not None]
    return Comparison(
        tuple(
            Recorded(p.partition_start, p.partition_end, str(p.attempt_id), p.checksum)
            for p in rows
        ),
        {p.partition_start: str(p.version_id) for p in rows},
        tuple(warehouse.markers_of(model, start, end)),
        table_exists,
    )


def record(
    state: StateStore,
    findings: Sequence[Finding],
    grains: Mapping[str, str],
    reason: Callable[[Sequence[Finding]], str],
    actor: str,
    at: str,
    run_id: str | None = None,
) -> list[Marked]:
    """Mark each finding's partition `missing` or `diverged`, once per kind, with a history
    event per model and kind (`reason` says what found them)."""
    grouped: dict[tuple[str, MarkKind], list[Finding]] = {}
    for finding in findings:
        kind = finding.kind.mark_kind
        if kind is not None and finding.attempt_id is not None:
            grouped.setdefault((finding.model, kind), []).append(finding)
    done = []
    for (model, kind), group in grouped.items():
        open_marks = {t.mark.start for t in state.open_taints(model) if t.kind is kind}
        new = [f for f in group if f.start not in open_marks]
        if not new:
            done.append(Marked(model, kind, None, 0, len(group)))
            continue
        taint = Taint(
            taint_id=new_taint_id(),
            model=model,
            grain=grains[model],
            start=min(f.start for f in new),
            end=max(f.end for f in new),
            reason=reason(new),
            actor=actor,
            at=at,
            kind=kind,
            run_id=run_id,
        )
        marks = [Mark(model, f.start, f.end, str(f.attempt_id), 0) for f in new]
        state.mark(taint, marks, _telling(taint, len(new)))
        done.append(Marked(model, kind, taint.taint_id, len(new), len(group) - len(new)))
    return done


def _telling(taint: Taint, count: int) -> Callable[[Sequence[Mark]], Told]:
    def tell(marks: Sequence[Mark]) -> Told:
        event = Event(
            kind="verify",
            actor=taint.actor,
            at=taint.at,
            model=taint.model,
            reason=f"{taint.reason}: {count} partition(s) marked {taint.kind.value}",
            detail={"taint_id": taint.taint_id, "kind": taint.kind.value, "partitions": count},
        )
        return Told(event, ())

    return tell


def check_on_start(engine: Engine, state: StateStore, project: Project, at: str) -> list[str]:
    """What a writer checks before it writes: each model that published has its table, and the
    commit marker of its newest published attempt (two cheap looks per model, one query for
    all the markers). A model failing either is compared partition by partition and what
    diverged is marked; returns a warning per model marked."""
    newest = {
        name: attempt
        for name in project.order
        if (attempt := state.last_published_attempt(name)) is not None
    }
    if not newest:
        return []
    held = engine.markers(list(newest.values()))
    specs = {model: project.model(model) for model in newest}
    findings: list[Finding] = []
    for model, attempt in newest.items():
        exists = engine.table_columns(specs[model].published_table) is not None
        if exists and attempt in held:
            continue
        findings += compare_model(state, engine, model, *EVERY, exists).findings(model)
    marked = record(
        state,
        findings,
        {model: spec.grain.value for model, spec in specs.items()},
        lambda found: "a writer found " + ", ".join(sorted({f.kind.value for f in found})),
        "tidegate",
        at,
    )
    warnings = []
    for model in sorted({m.model for m in marked}):
        spec = specs[model]
        mine = [f for f in findings if f.model == model]
        kinds = ", ".join(sorted({f.kind.value for f in mine}))
        span = spec.span(min(f.start for f in mine), max(f.end for f in mine)).label(spec.keys)
        warnings.append(
            f"warning: the warehouse does not hold what the ledger records of {model}: "
            f"{len(mine)} partition(s) in {span} ({kinds}), marked so nothing is built on "
            f"them; `tidegate verify {model}` lists them, `tidegate backfill {model} "
            f"--partitions {span} --stale-only` republishes them"
        )
    return warnings
