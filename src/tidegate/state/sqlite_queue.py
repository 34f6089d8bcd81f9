"""SQLite's part of the queue tables (the rest is ledger_queue): its clock, and no row locks to
skip — BEGIN IMMEDIATE makes every write transaction, claims included, one at a time."""

from __future__ import annotations

from typing import Any

from tidegate.state import ledger_queue
from tidegate.state.sqlite_tables import SQLiteTables


class QueueTables(ledger_queue.QueueTables, SQLiteTables):
    NOW_MS = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    SKIP_LOCKED = ""

    def _hold_queue(self, con: Any) -> None:
        """Nothing: the write transaction already excludes every other."""
