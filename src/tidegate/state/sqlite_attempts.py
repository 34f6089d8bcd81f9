"""SQLite's part of the attempt tables (the rest is ledger_attempts): the state move and the
upserts of results."""

from __future__ import annotations

import json
from typing import Any

from tidegate.state import ledger_attempts
from tidegate.state.sqlite_tables import SQLiteTables


class AttemptTables(ledger_attempts.AttemptTables, SQLiteTables):
    # A result recorded again replaces the first and goes to the end of the order (a new rowid).
    RECORD_CHECK = "INSERT OR REPLACE INTO check_results VALUES (?, ?, ?, ?, ?, ?, ?)"
    RECORD_RECONCILIATION = "INSERT OR REPLACE INTO reconciliations VALUES (?, ?, ?, ?, ?, ?)"
    RECORD_INPUT = "INSERT OR REPLACE INTO attempt_inputs VALUES (?, ?, ?, ?, ?, ?, ?)"

    def _move_attempt(self, con: Any, params: tuple[Any, ...], allowed: list[str]) -> int:
        moved = con.execute(
            "UPDATE attempts SET state = ?, ended_at = coalesce(?, ended_at), "
            "row_count = coalesce(?, row_count), checksum = coalesce(?, checksum), "
            "error = coalesce(?, error) WHERE attempt_id = ? "
            "AND state IN (SELECT value FROM json_each(?))",
            (*params, json.dumps(allowed)),
        )
        return int(moved.rowcount)
