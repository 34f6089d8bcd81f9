"""Ledger table of the notification outbox."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tidegate.notify.row import ConsumerRead, OutboxRow
from tidegate.state.codec import outbox_from_row
from tidegate.state.sqlite_tables import SQLiteTables


class OutboxTables(SQLiteTables):
    def add_outbox(
        self,
        entries: Sequence[tuple[str, str]],
        at: str,
        reads: Mapping[int, Sequence[ConsumerRead]] | None = None,
    ) -> list[int]:
        ids: list[int] = []
        with self._tx() as con:
            for index, (target, payload) in enumerate(entries):
                cursor = con.execute(
                    "INSERT INTO outbox (target, payload, created_at, next_attempt_at) "
                    "VALUES (?, ?, ?, ?)",
                    (target, payload, at, at),
                )
                assert cursor.lastrowid is not None  # an INSERT into a rowid table sets it
                ids.append(cursor.lastrowid)
                con.executemany(
                    "INSERT INTO consumer_reads VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (r.consumer, r.model, r.start, r.end, ids[-1], at)
                        for r in (reads or {}).get(index, ())
                    ],
                )
        return ids

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

    def mark_outbox_delivered(self, row_id: int, at: str) -> None:
        with self._tx() as con:
            con.execute(
                "UPDATE outbox SET delivered_at = ? WHERE id = ? AND delivered_at IS NULL",
                (at, row_id),
            )

    def mark_outbox_failed(self, row_id: int, error: str, next_attempt_at: str) -> None:
        with self._tx() as con:
            con.execute(
                "UPDATE outbox SET last_error = ?, next_attempt_at = ? "
                "WHERE id = ? AND delivered_at IS NULL",
                (error, next_attempt_at, row_id),
            )

    def outbox(self, target: str | None = None, pending_only: bool = False) -> list[OutboxRow]:
        query = "SELECT * FROM outbox WHERE (? IS NULL OR target = ?)"
        if pending_only:
            query += " AND delivered_at IS NULL"
        rows = self._all(query + " ORDER BY id", (target, target))
        return [outbox_from_row(r) for r in rows]
