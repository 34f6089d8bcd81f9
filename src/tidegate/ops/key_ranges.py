"""What a backfill of an update model asks its table before it starts (read-only): that the
table and its columns exist, which chunks `all` covers (from the smallest to the largest key,
resolved once and recorded with the run's plan: `resume` never recomputes it), and for a dry
run the rows of each chunk."""

from __future__ import annotations

from typing import Any

from tidegate.domain.errors import UsageError
from tidegate.domain.model import ModelSpec
from tidegate.domain.partitions import IntervalSet, PartitionRange, floor
from tidegate.engines.factory import open_engine
from tidegate.execution.update import table_problems, updater
from tidegate.ops.context import Context

# chunks a dry run lists with their rows (the total covers them all)
SHOWN_CHUNKS = 20


def resolve(ctx: Context, spec: ModelSpec, text: str) -> PartitionRange:
    """The chunks of `text` (`START..END`, one chunk, or `all`) of an update model's table,
    after checking the table has the key and set columns; UsageError (nothing written) when
    it does not, or when `all` finds no rows."""
    engine = open_engine(ctx.project, ctx.wait, read_only=True)
    try:
        warehouse, update = updater(engine, spec)
        problems = table_problems(engine, spec)
        if problems:
            raise UsageError(f"{spec.name}: {'; '.join(problems)}; nothing was written")
        if text.strip() != "all":
            return spec.parse_range(text)
        bounds = warehouse.key_bounds(update.table, spec.partition_column)
    finally:
        engine.close()
    if bounds is None:
        raise UsageError(f"{spec.name}: table {update.table} has no rows; nothing to backfill")
    first = floor(spec.grain, bounds[0], spec.chunk_size)
    last = floor(spec.grain, bounds[1], spec.chunk_size)
    return spec.span(first, last + spec.chunk_size)


def chunk_rows(ctx: Context, spec: ModelSpec, selection: IntervalSet) -> dict[str, Any]:
    """A dry run's view of the table: its rows in the selection, and per chunk (the first
    SHOWN_CHUNKS chunks, and the largest), counted in one pass per range."""
    engine = open_engine(ctx.project, ctx.wait, read_only=True)
    try:
        warehouse, update = updater(engine, spec)
        counts: dict[int, int] = {}
        for start, end in selection.intervals:
            counts.update(
                warehouse.rows_per_chunk(
                    update.table, spec.partition_column, spec.chunk_size, (start, end)
                )
            )
    finally:
        engine.close()
    shown = sorted(counts)[:SHOWN_CHUNKS]
    largest = max(counts.values(), default=0)
    return {
        "table": update.table,
        "rows": sum(counts.values()),
        "rows_per_chunk": {str(start): counts[start] for start in shown},
        "largest_chunk_rows": largest,
        "empty_chunks": sum(len(r) for r in selection.ranges(spec.grain, spec.chunk_size))
        - len(counts),
    }
