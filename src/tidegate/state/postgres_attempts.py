"""PostgreSQL's part of the attempt tables (the rest is ledger_attempts): the state move and
the upserts of results."""

from __future__ import annotations

from typing import Any

from tidegate.state import ledger_attempts
from tidegate.state.ledger_attempts import publish_one as publish_one  # tests hold a publish
from tidegate.state.postgres_taints import TaintTables


class AttemptTables(ledger_attempts.AttemptTables, TaintTables):
    # A result recorded again replaces the first and goes to the end of the order, as SQLite's
    # INSERT OR REPLACE does (its rowid is new).
    RECORD_CHECK = (
        "INSERT INTO check_results (attempt_id, name, kind, severity, passed, measured, "
        "message) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (attempt_id, name) DO UPDATE "
        "SET kind = excluded.kind, severity = excluded.severity, passed = excluded.passed, "
        "measured = excluded.measured, message = excluded.message, rowid = excluded.rowid"
    )
    RECORD_RECONCILIATION = (
        "INSERT INTO reconciliations (attempt_id, name, source_value, target_value, tolerance, "
        "passed) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (attempt_id, name) DO UPDATE SET "
        "source_value = excluded.source_value, target_value = excluded.target_value, "
        "tolerance = excluded.tolerance, passed = excluded.passed, rowid = excluded.rowid"
    )
    RECORD_INPUT = (
        "INSERT INTO attempt_inputs (attempt_id, upstream, kind, range_start, range_end, "
        "fingerprint, upstream_attempts) VALUES (%s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (attempt_id, upstream) DO UPDATE SET kind = excluded.kind, "
        "range_start = excluded.range_start, range_end = excluded.range_end, "
        "fingerprint = excluded.fingerprint, upstream_attempts = excluded.upstream_attempts"
    )

    def _move_attempt(self, con: Any, params: tuple[Any, ...], allowed: list[str]) -> int:
        # compare-and-set: a concurrent move of the same attempt is waited for, and the state
        # it left is the one checked
        moved = con.execute(
            "UPDATE attempts SET state = %s, ended_at = coalesce(%s, ended_at), "
            "row_count = coalesce(%s, row_count), checksum = coalesce(%s, checksum), "
            "error = coalesce(%s, error) WHERE attempt_id = %s AND state = ANY(%s)",
            (*params, allowed),
        )
        return int(moved.rowcount)
