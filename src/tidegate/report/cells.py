"""The heatmap's cells: every partition of a model from its first to the last one due, each in
one state, sent as run-length segments. Pure arithmetic over partition bounds, no I/O.

A cell is found by its ordinal (0 for the first partition of the calendar); the page computes a
cell's label and place from the model's grain, the first partition and the ordinal, so nothing
per partition is sent but its state, its writer and, in the file report, its details.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from tidegate.domain.partitions import DAY_SECONDS, HOUR_SECONDS, Grain, to_utc
from tidegate.report.rows import CellRow

# The legend, in this order; a cell's state is its index here.
STATES = ("published", "stale", "tainted", "failed", "skipped", "running", "queued", "missing")
STATE_INDEX = {name: index for index, name in enumerate(STATES)}
PUBLISHED, STALE, TAINTED, FAILED, SKIPPED, RUNNING, QUEUED, MISSING = range(len(STATES))
NO_VERSION = -1


def _month(ts: int) -> int:
    moment = to_utc(ts)
    return moment.year * 12 + moment.month - 1


@dataclass(frozen=True)
class Calendar:
    """`n` consecutive partitions of `grain`, the first starting at `first`; a cursor model's
    cells are the intervals it processed, in order (`starts`), not every value between."""

    grain: Grain
    first: int
    n: int
    step: int = 0  # a key range's chunk size
    starts: tuple[int, ...] = ()

    def ordinal(self, start: int) -> int:
        """The cell of the partition starting at `start` (rounded down into the grain)."""
        if self.grain is Grain.CURSOR:
            return bisect_left(self.starts, start)
        if self.grain is Grain.DAY:
            return (start - self.first) // DAY_SECONDS
        if self.grain is Grain.HOUR:
            return (start - self.first) // HOUR_SECONDS
        if self.grain is Grain.MONTH:
            return _month(start) - _month(self.first)
        if self.grain is Grain.RANGE:
            return (start - self.first) // self.step
        return start - self.first


def calendar(
    grain: Grain, expected: tuple[int, int] | None, known: Sequence[CellRow], step: int = 0
) -> Calendar:
    """The cells to draw: the `expected` partitions [start, end) — those due by now — and every
    partition the ledger knows, whichever reaches further either way."""
    if grain is Grain.CURSOR:
        return Calendar(grain, 0, len(known), starts=tuple(row.start for row in known))
    bounds = [b for b in (expected,) if b is not None and b[0] < b[1]]
    if known:
        bounds.append((known[0].start, known[-1].end))
    if not bounds:
        return Calendar(grain, 0, 0, step)
    first = min(b[0] for b in bounds)
    end = max(b[1] for b in bounds)
    probe = Calendar(grain, first, 0, step)
    # `end` is exclusive: the cell count is the ordinal of the partition starting there
    return Calendar(grain, first, max(probe.ordinal(end), 0), step)


@dataclass
class Cells:
    """Per cell: its state (index into STATES) and the index of the version published there."""

    states: bytearray
    versions: list[int]


def paint(cal: Calendar, rows: Sequence[CellRow], version_index: dict[str, int]) -> Cells:
    """Every cell missing, then each known partition in its state (a later row at the same
    cell wins: only a model whose grain changed has two)."""
    cells = Cells(bytearray([MISSING]) * cal.n, [NO_VERSION] * cal.n)
    for row in rows:
        at = cal.ordinal(row.start)
        if 0 <= at < cal.n:
            # the only states the ledger holds besides these are attempts in flight
            cells.states[at] = STATE_INDEX.get(row.state, RUNNING)
            if row.version_id is not None:
                cells.versions[at] = version_index.get(row.version_id, NO_VERSION)
    return cells


def queue(
    cells: Cells,
    cal: Calendar,
    rows: Sequence[CellRow],
    plans: Sequence[tuple[str, Sequence[tuple[int, int]]]],
) -> None:
    """Mark the cells a live backfill will still write as queued: in its plan (run id,
    selection), not yet attempted by that run, and not in flight. Between two batches a
    backfill has nothing running, and its remaining partitions would otherwise read as
    missing or as whatever an earlier run left there."""
    if cal.grain is Grain.CURSOR or not plans:
        return  # a cursor plan is a source interval, not cells
    newest = {cal.ordinal(r.start): r.last_run_id or r.run_id for r in rows}
    for run_id, selection in plans:
        for start, end in selection:
            for at in range(max(cal.ordinal(start), 0), min(cal.ordinal(end), cal.n)):
                if cells.states[at] != RUNNING and newest.get(at) != run_id:
                    cells.states[at] = QUEUED


def taint(cells: Cells, cal: Calendar, intervals: Sequence[tuple[int, int]]) -> None:
    """Mark published (or stale) cells inside the open taint intervals as tainted: a partition
    that failed or runs again shows that instead."""
    for start, end in intervals:
        first, last = max(cal.ordinal(start), 0), min(cal.ordinal(end), cal.n)
        for at in range(first, last):
            if cells.states[at] in (PUBLISHED, STALE):
                cells.states[at] = TAINTED


def run_length(cells: Cells) -> list[int]:
    """Consecutive cells of the same state and version as flat triples
    [state, version, count, state, version, count, …]."""
    flat: list[int] = []
    states, versions = cells.states, cells.versions
    at, n = 0, len(states)
    while at < n:
        state, version, begin = states[at], versions[at], at
        at += 1
        while at < n and states[at] == state and versions[at] == version:
            at += 1
        flat += (state, version, at - begin)
    return flat


def counts(cells: Cells) -> dict[str, int]:
    """How many cells are in each state (every state named, zero included)."""
    return {name: cells.states.count(index) for index, name in enumerate(STATES)}
