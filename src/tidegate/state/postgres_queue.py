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
    # clock_timestamp(), not now(): the time a statement runs, not when its transaction began
    NOW_MS = "CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT)"
    SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"

    def _hold_queue(self, con: Any) -> None:
        con.execute("SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))", (QUEUE_LOCK,))
