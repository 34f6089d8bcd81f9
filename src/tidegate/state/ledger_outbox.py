"""Ledger table of the notification outbox, shared by both stores (each inserts a row and
claims the head in its own way: see sqlite_outbox and postgres_outbox)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tidegate.notify.row import ConsumerRead, OutboxRow
from tidegate.state.codec import outbox_from_row
from tidegate.state.ledger_tables import LedgerTables


class OutboxTables(LedgerTables):
    if TYPE_CHECKING:  # each store inserts a row its own way (sqlite_outbox, postgres_outbox)

        def _insert_outbox(self, con: Any, values: tuple[str, str, str, str]) -> int:
            """Insert one outbox row (target, payload, created_at, next_attempt_at); its id."""

    def add_outbox(
        self,
        entries: Sequence[tuple[str, str]],
        at: str,
        reads: Mapping[int, Sequence[ConsumerRead]] | None = None,
    ) -> list[int]:
        ids: list[int] = []
        with self._tx() as con:
            for index, (target, payload) in enumerate(entries):
                ids.append(self._insert_outbox(con, (target, payload, at, at)))
                con.executemany(
                    "INSERT INTO consumer_reads (consumer, model, range_start, range_end, "
                    "outbox_id, at) VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (r.consumer, r.model, r.start, r.end, ids[-1], at)
                        for r in (reads or {}).get(index, ())
                    ],
                )
        return ids

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
        rows = self._all(
            "SELECT * FROM outbox WHERE (CAST(:target AS TEXT) IS NULL OR target = :target) "
            "AND (NOT :pending OR delivered_at IS NULL) ORDER BY id",
            {"target": target, "pending": pending_only},
        )
        return [outbox_from_row(r) for r in rows]
