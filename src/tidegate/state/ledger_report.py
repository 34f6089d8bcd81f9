"""Ledger reads for the report and the UI shared by both stores: failing checks, events and
the outbox. Each store reads cells and run summaries, and takes its snapshot, in its own way
(sqlite_report, postgres_report)."""

from __future__ import annotations

from tidegate.notify.row import OutboxRow
from tidegate.report.rows import FailingCheck
from tidegate.state.base import Event
from tidegate.state.codec import event_from_row, outbox_from_row
from tidegate.state.ledger_tables import LedgerTables

# `fix`: the first later attempt that published the same partition with the same check
# passing — what fixed the failure, if anything did.
FAILING_CHECKS = (
    "SELECT a.model, a.grain, a.partition_start, a.partition_end, a.run_id, a.attempt_id,"
    " a.version_id, c.name, c.kind, c.severity, c.message, a.ended_at, fix.run_id, fix.ended_at"
    " FROM check_results c JOIN attempts a ON a.attempt_id = c.attempt_id"
    " LEFT JOIN attempts fix ON fix.rowid = ("
    " SELECT b.rowid FROM attempts b JOIN check_results r ON r.attempt_id = b.attempt_id"
    " WHERE b.model = a.model AND b.partition_start = a.partition_start"
    " AND b.state = 'published' AND b.rowid > a.rowid AND r.name = c.name AND r.passed = 1"
    " ORDER BY b.rowid LIMIT 1)"
    " WHERE c.passed = 0 ORDER BY a.rowid DESC, c.name LIMIT ?"
)
CURRENT_CHECK_FAILURES = (
    "SELECT a.model, a.grain, a.partition_start, a.partition_end, a.run_id, a.attempt_id,"
    " a.version_id, c.name, c.kind, c.severity, c.message, a.ended_at, NULL, NULL"
    " FROM partitions p JOIN check_results c ON c.attempt_id = p.last_attempt_id"
    " JOIN attempts a ON a.attempt_id = p.last_attempt_id"
    " WHERE p.model = ? AND c.passed = 0 ORDER BY p.partition_start, c.name"
)


class ReportTables(LedgerTables):
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
