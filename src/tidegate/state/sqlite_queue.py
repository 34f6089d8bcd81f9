"""SQLite's part of the queue tables (the rest is ledger_queue): its clock, and no row locks to
skip — BEGIN IMMEDIATE makes every write transaction, claims included, one at a time."""

from __future__ import annotations

from typing import Any

from tidegate.state import ledger_queue
from tidegate.state.sqlite_tables import SQLiteTables


class QueueTables(ledger_queue.QueueTables, SQLiteTables):
    LOCK_RUN = (
        "SELECT max_concurrency, rate_per_minute FROM runs WHERE run_id = :run "
        "AND status = 'running' AND stop_requested_at IS NULL AND halt IS NULL"
    )
    PICK_BATCH = (
        "SELECT batch, model, partition_start, partition_end, token FROM batches "
        "WHERE run_id = :run AND (state = 'queued' OR (state = 'leased' "
        "AND lease_expires <= :now)) ORDER BY batch LIMIT 1"
    )

    def _hold_queue(self, con: Any) -> None:
        """Nothing: the write transaction already excludes every other."""
