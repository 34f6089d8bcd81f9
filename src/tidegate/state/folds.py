"""Folding streams of ledger rows into summaries, the same for every store."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tidegate.report.rows import RunSummary
from tidegate.state.codec import run_from_row

Segment = tuple[str, str | None, int, int, int]

# Partitions in the state `status` counts them under (StateStore.segments): start, end, the
# version that published it and its state, in partition order.
SegmentRow = tuple[int, int, str | None, str]


def fold_segments(rows: Iterable[SegmentRow], limit: int) -> tuple[dict[str, int], list[Segment]]:
    """Counts by state over every row, and the first `limit` runs of consecutive partitions
    with the same state and writer: (state, version, count, start, end). One pass, constant
    memory: a long history is streamed, never held."""
    counts = dict.fromkeys(("published", "stale", "failed", "running", "known"), 0)
    found: list[list[Any]] = []
    for start, end, version, state in rows:
        counts["known"] += 1
        if state in counts:
            counts[state] += 1
        last = found[-1] if found else None
        if last and last[4] == start and last[0] == state and last[1] == version:
            last[2] += 1
            last[4] = end
            continue
        if len(found) < limit:
            found.append([state, version, 1, start, end])
    return counts, [(str(a), b, int(c), int(d), int(e)) for a, b, c, d, e in found]


def summarise_runs(rows: Iterable[Any]) -> list[RunSummary]:
    """Runs with their attempts counted by state, from one row per (run, attempt state): the
    run's columns, then attempt_state, attempts, published_rows, first_attempt_at and
    last_attempt_at (attempt_state NULL for a run without attempts). Kept in row order."""
    found: dict[str, RunSummary] = {}
    for row in rows:
        summary = found.get(row["run_id"])
        if summary is None:
            summary = RunSummary(run_from_row(row), {}, 0, None, None)
        states = dict(summary.states)
        if row["attempt_state"] is not None:
            states[row["attempt_state"]] = int(row["attempts"])
        found[row["run_id"]] = RunSummary(
            summary.run,
            states,
            summary.rows + int(row["published_rows"] or 0),
            _earliest(summary.first_attempt_at, row["first_attempt_at"]),
            _latest(summary.last_attempt_at, row["last_attempt_at"]),
        )
    return list(found.values())


def _earliest(a: str | None, b: str | None) -> str | None:
    return min((x for x in (a, b) if x is not None), default=None)


def _latest(a: str | None, b: str | None) -> str | None:
    return max((x for x in (a, b) if x is not None), default=None)
