"""Ledger reads for the report and the UI: whole histories in few statements, read-only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tidegate.notify.row import OutboxRow
from tidegate.report.rows import CellRow, FailingCheck, RunSummary
from tidegate.state.base import Event
from tidegate.state.codec import event_from_row, outbox_from_row
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

FAILING_CHECKS = (
    "SELECT a.model, a.grain, a.partition_start, a.partition_end, a.run_id, a.attempt_id,"
    " a.version_id, c.name, c.kind, c.severity, c.message, a.ended_at"
    " FROM check_results c JOIN attempts a ON a.attempt_id = c.attempt_id"
    " WHERE c.passed = 0 ORDER BY a.rowid DESC, c.name LIMIT ?"
)
CURRENT_CHECK_FAILURES = (
    "SELECT a.model, a.grain, a.partition_start, a.partition_end, a.run_id, a.attempt_id,"
    " a.version_id, c.name, c.kind, c.severity, c.message, a.ended_at"
    " FROM partitions p JOIN check_results c ON c.attempt_id = p.last_attempt_id"
    " JOIN attempts a ON a.attempt_id = p.last_attempt_id"
    " WHERE p.model = ? AND c.passed = 0 ORDER BY p.partition_start, c.name"
)


class ReportTables(SQLiteTables):
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

    def failing_checks(self, limit: int = 200) -> list[FailingCheck]:
        return [FailingCheck._make(tuple(r)) for r in self._all(FAILING_CHECKS, (limit,))]

    def current_check_failures(self, model: str) -> list[FailingCheck]:
        rows = self._all(CURRENT_CHECK_FAILURES, (model,))
        return [FailingCheck._make(tuple(r)) for r in rows]

    def recent_events(self, limit: int = 500) -> list[Event]:
        rows = self._all("SELECT * FROM events ORDER BY event_id DESC LIMIT ?", (limit,))
        return [event_from_row(r) for r in rows]

    def recent_outbox(self, limit: int = 200) -> list[OutboxRow]:
        rows = self._all("SELECT * FROM outbox ORDER BY id DESC LIMIT ?", (limit,))
        return [outbox_from_row(r) for r in rows]
