"""SQLite's part of the outbox table (the rest is ledger_outbox): a row's new id, and
claiming the head."""

from __future__ import annotations

from typing import Any

from tidegate.notify.row import OutboxRow
from tidegate.state import ledger_outbox
from tidegate.state.codec import outbox_from_row
from tidegate.state.sqlite_tables import SQLiteTables


class OutboxTables(ledger_outbox.OutboxTables, SQLiteTables):
    def _insert_outbox(self, con: Any, values: tuple[str, str, str, str]) -> int:
        cursor = con.execute(
            "INSERT INTO outbox (target, payload, created_at, next_attempt_at) VALUES (?, ?, ?, ?)",
            values,
        )
        assert cursor.lastrowid is not None  # an INSERT into a rowid table sets it
        return int(cursor.lastrowid)

    def claim_outbox(self, target: str, now: str, until: str) -> OutboxRow | None:
        with self._tx() as con:
            head = con.execute(
                "SELECT * FROM outbox WHERE target = ? AND delivered_at IS NULL "
                "ORDER BY id LIMIT 1",
                (target,),
            ).fetchone()
            # Only the head may go: a later row must not overtake one that is waiting.
            if head is None or head["next_attempt_at"] > now:
                return None
            con.execute(
                "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ? WHERE id = ?",
                (until, head["id"]),
            )
        return outbox_from_row(head, attempts=head["attempts"] + 1, next_attempt_at=until)
