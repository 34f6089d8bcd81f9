"""Taint: a contamination mark on published partitions, and how far it reaches downstream.

A taint is declared on a range of one model. It marks the partitions published there (depth 0)
and, through partition lineage, every published partition of a downstream model whose attempt
read a marked partition (depth 1), and those that read them (depth 2) … — a model reached along
several paths is marked once per partition, at its shallowest depth.

The mark names the attempt it contaminated: publishing another attempt of the partition (a
recovery, or any rerun) clears it, and a partition published from tainted input inherits the
mark (see the ledger's publish).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from tidegate.domain.partitions import IntervalSet


class MarkKind(str, Enum):
    """What a mark says of the partitions it reached."""

    TAINT = "taint"  # declared by a user: the data is bad
    STALE = "stale"  # an upstream partition it read was replaced by different content
    DIVERGED = "diverged"  # the warehouse holds another marker, or other rows, than recorded
    MISSING = "missing"  # the warehouse holds no marker, or no table, for it

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    MarkKind.TAINT: "tainted",
    MarkKind.STALE: "stale: upstream changed",
    MarkKind.DIVERGED: "diverged from the warehouse",
    MarkKind.MISSING: "missing from the warehouse",
}


class TaintPolicy(str, Enum):
    """What a run does with a partition whose upstream input is tainted."""

    BLOCK = "block"  # skip it: nothing built on contaminated input is published
    WARN = "warn"  # publish it, tainted too, and say so


@dataclass(frozen=True)
class Taint:
    """The declaration: a range of one model, why, by whom."""

    taint_id: str
    model: str
    grain: str
    start: int
    end: int
    reason: str
    actor: str
    at: str
    kind: MarkKind = MarkKind.TAINT
    # the run whose publish made a stale mark, or whose check found a diverged one
    run_id: str | None = None


@dataclass(frozen=True)
class Mark:
    """One published partition a taint reached."""

    model: str
    start: int
    end: int
    attempt_id: str
    depth: int
    via_model: str | None = None
    via_start: int | None = None


@dataclass(frozen=True)
class TaintedPartition:
    """An open mark as the ledger shows it: the mark, and its taint's reason and origin."""

    taint_id: str
    mark: Mark
    reason: str
    origin: str  # the model the taint was declared on
    marked_at: str
    kind: MarkKind = MarkKind.TAINT


@dataclass(frozen=True)
class Read:
    """A published partition of a model whose attempt read a window of an upstream model."""

    model: str
    start: int
    end: int
    attempt_id: str
    read_start: int
    read_end: int


Readers = Callable[[str, str, Sequence[tuple[int, int]]], Sequence[Read]]
"""(model, upstream, windows of upstream) → published partitions of model that read them."""


def propagate(
    origin: Sequence[Mark],
    order: Sequence[str],
    parents: Mapping[str, Sequence[str]],
    readers: Readers,
) -> list[Mark]:
    """The origin marks and every downstream mark they lead to.

    `order` lists the models downstream of the origin's model, each after the models it reads
    (topological order); `parents` maps each to the models it reads.
    """
    by_model: dict[str, dict[int, Mark]] = {}
    for mark in origin:
        by_model.setdefault(mark.model, {})[mark.start] = mark
    for model in order:
        reached: dict[int, Mark] = {}
        for parent in parents.get(model, ()):
            marked = by_model.get(parent)
            if not marked:
                continue
            upstream = _Index(marked.values())
            for read in readers(model, parent, upstream.intervals()):
                via = upstream.first_overlapping(read.read_start, read.read_end)
                if via is None:
                    continue
                mark = Mark(
                    model,
                    read.start,
                    read.end,
                    read.attempt_id,
                    via.depth + 1,
                    parent,
                    via.start,
                )
                known = reached.get(read.start)
                if known is None or mark.depth < known.depth:
                    reached[read.start] = mark
        if reached:
            by_model[model] = reached
    return [m for model in by_model.values() for m in sorted(model.values(), key=_start)]


def _start(mark: Mark) -> int:
    return mark.start


class _Index:
    """A model's marks in partition order, for overlap lookups."""

    def __init__(self, marks: Iterable[Mark]) -> None:
        self.marks = sorted(marks, key=_start)
        self.starts = [m.start for m in self.marks]

    def intervals(self) -> list[tuple[int, int]]:
        return list(IntervalSet.of([(m.start, m.end) for m in self.marks]).intervals)

    def first_overlapping(self, start: int, end: int) -> Mark | None:
        at = max(0, bisect.bisect_right(self.starts, start) - 1)
        for mark in self.marks[at:]:
            if mark.start >= end:
                return None
            if mark.end > start:
                return mark
        return None


def ranges_by_model(marks: Sequence[Mark]) -> dict[str, list[tuple[int, int]]]:
    """Marked partitions per model, merged into intervals, models in first-marked order."""
    grouped: dict[str, list[tuple[int, int]]] = {}
    for mark in marks:
        grouped.setdefault(mark.model, []).append((mark.start, mark.end))
    return {m: list(IntervalSet.of(spans).intervals) for m, spans in grouped.items()}


def reads_in(
    model: str, rows: Iterable[Sequence[Any]], windows: Sequence[tuple[int, int]]
) -> list[Read]:
    """The `Read`s among lineage rows (partition start, end, attempt, read start, read end) of
    `model` whose read window overlaps one of `windows`, once per partition, in order. One
    ledger query over the windows' whole span feeds it, not one per window."""
    merged = IntervalSet.of(list(windows)).intervals
    starts = [start for start, _ in merged]
    found: dict[int, Read] = {}
    for start, end, attempt, read_start, read_end in rows:
        # the last window starting before the read ends is the only one that may overlap it
        at = bisect.bisect_left(starts, read_end) - 1
        if at >= 0 and merged[at][1] > read_start:
            found.setdefault(start, Read(model, start, end, attempt, read_start, read_end))
    return [found[k] for k in sorted(found)]
