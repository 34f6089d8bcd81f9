"""The heatmap's cells: calendars, states painted from the ledger's rows, taint, run-length."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from tidegate.domain.partitions import DAY_SECONDS, Grain, PartitionRange, parse_partition
from tidegate.report import cells as grid
from tidegate.report.rows import CellRow

JAN_1 = parse_partition("2025-01-01", Grain.DAY).start


def day(n: int) -> int:
    return JAN_1 + n * DAY_SECONDS


def row(n: int, state: str, version: str | None = "v1") -> CellRow:
    return CellRow(day(n), day(n + 1), state, version, None, None, None, None, None)


def expand(flat: list[int]) -> list[tuple[int, int]]:
    return [(flat[k], flat[k + 1]) for k in range(0, len(flat), 3) for _ in range(flat[k + 2])]


def test_the_calendar_runs_from_the_first_due_partition_to_the_last_known_one() -> None:
    cal = grid.calendar(Grain.DAY, (day(0), day(10)), [row(3, "published"), row(14, "failed")])
    assert (cal.first, cal.n) == (day(0), 15)
    assert cal.ordinal(day(14)) == 14
    # a partition written before the declared start widens it the other way
    early = grid.calendar(Grain.DAY, (day(5), day(10)), [row(2, "published")])
    assert (early.first, early.n) == (day(2), 8)
    assert grid.calendar(Grain.DAY, None, []).n == 0


def test_month_and_key_calendars_count_partitions_not_seconds() -> None:
    months = PartitionRange(Grain.MONTH, *_bounds("2025-01", "2026-03", Grain.MONTH))
    cal = grid.calendar(Grain.MONTH, (months.start, months.end), [])
    assert cal.n == len(months) == 15
    assert cal.ordinal(parse_partition("2025-12", Grain.MONTH).start) == 11
    keys = grid.calendar(Grain.KEY, (0, 3), [])
    assert (keys.first, keys.n, keys.ordinal(2)) == (0, 3, 2)


def _bounds(first: str, last: str, grain: Grain) -> tuple[int, int]:
    return parse_partition(first, grain).start, parse_partition(last, grain).end


def test_cells_are_missing_unless_the_ledger_knows_them() -> None:
    rows = [row(1, "published"), row(2, "stale", "v0"), row(3, "skipped", None), row(4, "pending")]
    cal = grid.calendar(Grain.DAY, (day(0), day(6)), rows)
    cells = grid.paint(cal, rows, {"v0": 0, "v1": 1})
    assert [grid.STATES[s] for s in cells.states] == [
        "missing",
        "published",
        "stale",
        "skipped",
        "running",  # an attempt in flight, whatever its exact state
        "missing",
    ]
    assert cells.versions == [-1, 1, 0, -1, 1, -1]
    counts = grid.counts(cells)
    assert counts == {
        "published": 1,
        "stale": 1,
        "tainted": 0,
        "failed": 0,
        "skipped": 1,
        "running": 1,
        "queued": 0,
        "missing": 2,
    }


def test_taint_marks_published_and_stale_cells_only() -> None:
    rows = [row(0, "published"), row(1, "stale"), row(2, "failed"), row(3, "published")]
    cal = grid.calendar(Grain.DAY, (day(0), day(5)), rows)
    cells = grid.paint(cal, rows, {"v1": 0})
    grid.taint(cells, cal, [(day(0), day(3)), (day(4), day(9))])
    assert [grid.STATES[s] for s in cells.states] == [
        "tainted",
        "tainted",
        "failed",
        "published",
        "missing",
    ]


@given(st.lists(st.tuples(st.integers(0, len(grid.STATES) - 1), st.integers(-1, 3)), max_size=200))
def test_run_length_segments_expand_back_to_the_cells(pairs: list[tuple[int, int]]) -> None:
    cells = grid.Cells(bytearray(s for s, _ in pairs), [v for _, v in pairs])
    flat = grid.run_length(cells)
    assert expand(flat) == pairs
    # maximal runs: two neighbouring segments always differ
    triples = [flat[k : k + 3] for k in range(0, len(flat), 3)]
    assert all(a[:2] != b[:2] for a, b in itertools.pairwise(triples))
    assert all(t[2] > 0 for t in triples)


def test_partitions_a_live_backfill_plans_are_queued_until_it_attempts_them() -> None:
    rows = [
        row(1, "published"),
        row(2, "stale", "v0"),
        CellRow(day(3), day(4), "published", "v1", "run-b", "1:00", None, None, None),
        CellRow(day(4), day(5), "pending", None, None, None, "run-b", "v1", None),
        CellRow(day(5), day(6), "failed", None, None, None, "run-a", "v1", "boom"),
    ]
    cal = grid.calendar(Grain.DAY, (day(0), day(9)), rows)
    cells = grid.paint(cal, rows, {"v0": 0, "v1": 1})
    # the plan reaches past the calendar's end: what is not drawn is not queued
    grid.queue(cells, cal, rows, [("run-b", ((day(2), day(7)), (day(8), day(12))))])
    assert [grid.STATES[s] for s in cells.states] == [
        "missing",
        "published",
        "queued",  # stale now; the backfill rewrites it
        "published",  # the backfill published it already
        "running",
        "queued",  # another run failed it; this one has yet to try
        "queued",
        "missing",
        "queued",
    ]
    assert cells.versions[2] == 0  # what is published there until then still shows
    assert grid.counts(cells)["queued"] == 4
