"""PostgreSQL's part of the queue tables (the rest is ledger_queue): the server's clock, claims
that skip the rows another claim holds, and the lock that serializes queueing runs."""

from __future__ import annotations

from typing import Any

from tidegate.state import ledger_queue
from tidegate.state.postgres_tables import PostgresTables

# the advisory lock (two-key form: "queue", this schema) held while a run's batches are queued,
# so that two coordinators cannot both find a partition free and both queue it
QUEUE_LOCK = 0x71756575


class QueueTables(ledger_queue.QueueTables, PostgresTables):
    LOCK_RUN = (
        "SELECT max_concurrency, rate_per_minute FROM runs WHERE run_id = :run "
        "AND status = 'running' AND stop_requested_at IS NULL AND halt IS NULL "
        "FOR NO KEY UPDATE SKIP LOCKED"
    )
    PICK_BATCH = (
        "SELECT batch, model, partition_start, partition_end, token FROM batches "
        "WHERE run_id = :run AND (state = 'queued' OR (state = 'leased' "
        "AND lease_expires <= :now)) ORDER BY batch LIMIT 1 FOR UPDATE SKIP LOCKED"
    )

    def _hold_queue(self, con: Any) -> None:
        con.execute("SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))", (QUEUE_LOCK,))
