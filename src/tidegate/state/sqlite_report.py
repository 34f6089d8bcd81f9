"""SQLite's part of the ledger reads for the report and the UI (the rest is ledger_report):
its snapshot and stamp, cells and run summaries, whole histories in few statements."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tidegate.report.rows import CellRow, RunSummary
from tidegate.state import ledger_report
from tidegate.state.folds import summarise_runs
from tidegate.state.sqlite_tables import SQLiteTables

# The states `status` counts (PartitionTables.segments), with the run and version that explain
# each partition: the published attempt's, and the newest attempt's when that one differs.
CELLS = (
    "SELECT p.partition_start, p.partition_end, CASE"
    " WHEN p.last_state IN ('pending', 'running', 'staged', 'audited') THEN 'running'"
    " WHEN p.last_state = 'failed' THEN 'failed'"
    " WHEN p.attempt_id IS NULL THEN p.last_state"
    " WHEN p.version_id IS :active THEN 'published' ELSE 'stale' END,"
    " p.version_id, p.run_id, p.checksum,"
    " CASE WHEN p.last_attempt_id IS p.attempt_id THEN NULL ELSE a.run_id END,"
    " CASE WHEN p.last_attempt_id IS p.attempt_id THEN NULL ELSE a.version_id END,"
    " CASE WHEN p.last_attempt_id IS p.attempt_id THEN NULL ELSE p.last_error END"
    " FROM partitions p LEFT JOIN attempts a ON a.attempt_id = p.last_attempt_id"
    " WHERE p.model = :model ORDER BY p.partition_start"
)

RUN_SUMMARIES = (
    "WITH recent AS (SELECT * FROM runs ORDER BY run_id DESC LIMIT ?)"
    " SELECT recent.*, a.state AS attempt_state, count(a.attempt_id) AS attempts,"
    " sum(CASE WHEN a.state = 'published' THEN a.row_count ELSE 0 END) AS published_rows,"
    " min(a.started_at) AS first_attempt_at, max(a.ended_at) AS last_attempt_at"
    " FROM recent LEFT JOIN attempts a ON a.run_id = recent.run_id"
    " GROUP BY recent.run_id, a.state ORDER BY recent.run_id DESC"
)


class ReportTables(ledger_report.ReportTables, SQLiteTables):
    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._lock:
            self._con.execute("BEGIN")
            try:
                yield
            finally:
                self._con.execute("COMMIT")

    def ledger_stamp(self) -> str:
        with self._lock:
            row = self._con.execute("PRAGMA data_version").fetchone()
            return f"{int(row[0])}.{self._con.total_changes}"

    def partition_cells(self, model: str, active_version: str | None) -> list[CellRow]:
        with self._lock:
            cursor = self._con.cursor()
            cursor.row_factory = None  # plain tuples: a long history is many rows
            rows = cursor.execute(CELLS, {"model": model, "active": active_version}).fetchall()
        return [CellRow._make(row) for row in rows]

    def run_summaries(self, limit: int = 200) -> list[RunSummary]:
        return summarise_runs(self._all(RUN_SUMMARIES, (limit,)))
