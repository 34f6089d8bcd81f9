"""PostgreSQL's part of the ledger reads for the report and the UI (the rest is
ledger_report): its snapshot and stamp, cells and run summaries, in few statements."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from psycopg.rows import tuple_row

from tidegate.report.rows import CellRow, RunSummary
from tidegate.state import ledger_report
from tidegate.state.folds import summarise_runs
from tidegate.state.postgres_tables import PostgresTables

# The states `status` counts (PartitionTables.segments), with the run and version that explain
# each partition: the published attempt's, and the newest attempt's when that one differs.
CELLS = (
    "SELECT p.partition_start, p.partition_end, CASE"
    " WHEN p.last_state IN ('pending', 'running', 'staged', 'audited') THEN 'running'"
    " WHEN p.last_state = 'failed' THEN 'failed'"
    " WHEN p.attempt_id IS NULL THEN p.last_state"
    " WHEN p.version_id IS NOT DISTINCT FROM %(active)s::text THEN 'published' ELSE 'stale' END,"
    " p.version_id, p.run_id, p.checksum,"
    " CASE WHEN p.last_attempt_id IS NOT DISTINCT FROM p.attempt_id THEN NULL ELSE a.run_id END,"
    " CASE WHEN p.last_attempt_id IS NOT DISTINCT FROM p.attempt_id THEN NULL"
    "  ELSE a.version_id END,"
    " CASE WHEN p.last_attempt_id IS NOT DISTINCT FROM p.attempt_id THEN NULL"
    "  ELSE p.last_error END"
    " FROM partitions p LEFT JOIN attempts a ON a.attempt_id = p.last_attempt_id"
    " WHERE p.model = %(model)s ORDER BY p.partition_start"
)

# One row per (run, attempt state) of the newest runs: what summarise_runs folds.
RUN_SUMMARIES = (
    "WITH recent AS (SELECT * FROM runs ORDER BY run_id DESC LIMIT %s),"
    " counted AS (SELECT a.run_id, a.state AS attempt_state, count(*) AS attempts,"
    "  sum(CASE WHEN a.state = 'published' THEN a.row_count ELSE 0 END) AS published_rows,"
    "  min(a.started_at) AS first_attempt_at, max(a.ended_at) AS last_attempt_at"
    "  FROM attempts a WHERE a.run_id IN (SELECT run_id FROM recent)"
    "  GROUP BY a.run_id, a.state)"
    " SELECT recent.*, counted.attempt_state, counted.attempts, counted.published_rows,"
    " counted.first_attempt_at, counted.last_attempt_at"
    " FROM recent LEFT JOIN counted ON counted.run_id = recent.run_id"
    " ORDER BY recent.run_id DESC, counted.attempt_state"
)


class ReportTables(ledger_report.ReportTables, PostgresTables):
    @contextmanager
    def reading(self) -> Iterator[None]:
        # One snapshot for every read inside; writers in other processes go on meanwhile.
        # This thread keeps one connection for the block: every read inside runs on it.
        with self._errors(), self._pool.session() as con:
            con.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield
            finally:
                con.execute("COMMIT")

    def ledger_stamp(self) -> str:
        # ledger_clock moves with every committed write transaction, of any process
        row = self._one("SELECT changes FROM ledger_clock WHERE id = 1")
        return str(row[0]) if row else "0"

    def partition_cells(self, model: str, active_version: str | None) -> list[CellRow]:
        with (
            self._errors(),
            self._pool.session() as con,
            con.cursor(row_factory=tuple_row) as cursor,
        ):
            # plain tuples: a long history is many rows
            rows = cursor.execute(CELLS, {"model": model, "active": active_version}).fetchall()
        return [CellRow._make(row) for row in rows]

    def run_summaries(self, limit: int = 200) -> list[RunSummary]:
        return summarise_runs(self._all(RUN_SUMMARIES, (limit,)))
