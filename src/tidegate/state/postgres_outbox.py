"""PostgreSQL's part of the outbox table (the rest is ledger_outbox): a row's new id, and
claiming the head."""

from __future__ import annotations

from typing import Any

from tidegate.notify.row import OutboxRow
from tidegate.state import ledger_outbox
from tidegate.state.codec import outbox_from_row
from tidegate.state.postgres_tables import PostgresTables


class OutboxTables(ledger_outbox.OutboxTables, PostgresTables):
    def _insert_outbox(self, con: Any, values: tuple[str, str, str, str]) -> int:
        added = con.execute(
            "INSERT INTO outbox (target, payload, created_at, next_attempt_at) "
            "VALUES (%s, %s, %s, %s) RETURNING id",
            values,
        ).fetchone()
        assert added is not None  # INSERT … RETURNING returns the row it inserted
        return int(added[0])

    def claim_outbox(self, target: str, now: str, until: str) -> OutboxRow | None:
        with self._tx() as con:
            head = con.execute(
                "SELECT id FROM outbox WHERE target = %s AND delivered_at IS NULL "
                "ORDER BY id LIMIT 1",
                (target,),
            ).fetchone()
            if head is None:
                return None
            # Only the head may go: a later row must not overtake one that is waiting. A
            # delivery holding the head makes SKIP LOCKED find nothing (no waiting), and one
            # that claimed or delivered it since the first read leaves a row these conditions,
            # re-checked on its newest version, no longer match.
            claimed = con.execute(
                "SELECT * FROM outbox WHERE id = %s AND delivered_at IS NULL "
                "AND next_attempt_at <= %s FOR UPDATE SKIP LOCKED",
                (head[0], now),
            ).fetchone()
            if claimed is None:
                return None
            con.execute(
                "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = %s WHERE id = %s",
                (until, claimed["id"]),
            )
        return outbox_from_row(claimed, attempts=claimed["attempts"] + 1, next_attempt_at=until)
