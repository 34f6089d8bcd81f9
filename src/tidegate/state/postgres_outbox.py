"""PostgreSQL ledger table of the notification outbox."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tidegate.notify.row import ConsumerRead, OutboxRow
from tidegate.state.codec import outbox_from_row
from tidegate.state.postgres_tables import PostgresTables


class OutboxTables(PostgresTables):
    def add_outbox(
        self,
        entries: Sequence[tuple[str, str]],
        at: str,
        reads: Mapping[int, Sequence[ConsumerRead]] | None = None,
    ) -> list[int]:
        ids: list[int] = []
        with self._tx() as con:
            for index, (target, payload) in enumerate(entries):
                added = con.execute(
                    "INSERT INTO outbox (target, payload, created_at, next_attempt_at) "
                    "VALUES (%s, %s, %s, %s) RETURNING id",
                    (target, payload, at, at),
                ).fetchone()
                assert added is not None  # INSERT … RETURNING returns the row it inserted
                ids.append(int(added[0]))
                told = (reads or {}).get(index, ())
                if told:
                    with con.cursor() as cursor:
                        cursor.executemany(
                            "INSERT INTO consumer_reads (consumer, model, range_start, "
                            "range_end, outbox_id, at) VALUES (%s, %s, %s, %s, %s, %s)",
                            [(r.consumer, r.model, r.start, r.end, ids[-1], at) for r in told],
                        )
        return ids

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

    def mark_outbox_delivered(self, row_id: int, at: str) -> None:
        with self._tx() as con:
            con.execute(
                "UPDATE outbox SET delivered_at = %s WHERE id = %s AND delivered_at IS NULL",
                (at, row_id),
            )

    def mark_outbox_failed(self, row_id: int, error: str, next_attempt_at: str) -> None:
        with self._tx() as con:
            con.execute(
                "UPDATE outbox SET last_error = %s, next_attempt_at = %s "
                "WHERE id = %s AND delivered_at IS NULL",
                (error, next_attempt_at, row_id),
            )

    def outbox(self, target: str | None = None, pending_only: bool = False) -> list[OutboxRow]:
        rows = self._all(
            "SELECT * FROM outbox WHERE (%(target)s::text IS NULL OR target = %(target)s) "
            "AND (NOT %(pending)s OR delivered_at IS NULL) ORDER BY id",
            {"target": target, "pending": pending_only},
        )
        return [outbox_from_row(r) for r in rows]
