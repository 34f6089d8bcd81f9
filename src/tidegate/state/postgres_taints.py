"""PostgreSQL ledger tables of taints (contamination marks and their lineage) and of
consumers' reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from tidegate.domain.taint import Mark, Read, Taint, TaintedPartition, propagate, reads_in
from tidegate.state.codec import mark_params, taint_params, tainted_from_row
from tidegate.state.postgres_tables import PostgresTables

# The lock that keeps marks and publishes apart: pg_advisory_xact_lock(MARKS_LOCK, hashtext of
# the ledger's schema). Publishes share it; a taint holds it alone.
#
# Why a lock and not SERIALIZABLE: a taint reads lineage (published partitions and what their
# attempts read) and writes marks; a publish writes lineage and reads marks (it inherits the
# open marks of what it read). Under READ COMMITTED, a publish committing while a taint runs
# would be missed by both: the taint read lineage before it, and it read marks before the taint
# committed. With the lock, a taint waits for the publishes in flight, then sees them all (each
# READ COMMITTED statement after the lock sees every commit before it), and publishes that come
# later wait for the taint and see its marks. SERIALIZABLE would detect the same conflict
# only by failing one of the transactions, which every caller would then have to retry.
MARKS_LOCK = 0x7464_0002

OPEN_MARKS = (
    "SELECT m.*, t.reason, t.model AS origin FROM tainted_partitions m "
    "JOIN taints t ON t.taint_id = m.taint_id WHERE m.cleared_at IS NULL "
)

# Published partitions of a model whose attempt read a window of an upstream model.
READERS = (
    "SELECT p.partition_start, p.partition_end, p.attempt_id, i.range_start, i.range_end "
    "FROM attempt_inputs i JOIN partitions p ON p.attempt_id = i.attempt_id "
    "WHERE i.upstream = %s AND i.kind = 'model' AND p.model = %s "
    "AND i.range_start < %s AND i.range_end > %s ORDER BY p.partition_start"
)


class TaintTables(PostgresTables):
    def taint(
        self, taint: Taint, order: Sequence[str], parents: Mapping[str, Sequence[str]]
    ) -> list[Mark]:
        with self._tx() as con:
            hold_marks(con, exclusive=True)
            origin = [
                Mark(taint.model, r[0], r[1], r[2], 0)
                for r in con.execute(
                    "SELECT partition_start, partition_end, attempt_id FROM partitions "
                    "WHERE model = %s AND partition_start >= %s AND partition_start < %s "
                    "AND attempt_id IS NOT NULL ORDER BY partition_start",
                    (taint.model, taint.start, taint.end),
                )
            ]
            if not origin:
                return []
            marks = propagate(origin, order, parents, lambda m, u, w: _readers(con, m, u, w))
            con.execute(
                "INSERT INTO taints (taint_id, model, grain, range_start, range_end, reason, "
                "actor, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                taint_params(taint),
            )
            with con.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO tainted_partitions (taint_id, model, partition_start, "
                    "partition_end, attempt_id, depth, via_model, via_start, marked_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    [mark_params(taint, m) for m in marks],
                )
        return marks

    def open_taints(
        self, model: str | None = None, start: int | None = None, end: int | None = None
    ) -> list[TaintedPartition]:
        rows = self._all(
            OPEN_MARKS + "AND (%(model)s::text IS NULL OR m.model = %(model)s) "
            "AND (%(start)s::bigint IS NULL OR m.partition_end > %(start)s) "
            "AND (%(end)s::bigint IS NULL OR m.partition_start < %(end)s) "
            "ORDER BY m.model, m.partition_start, m.depth",
            {"model": model, "start": start, "end": end},
        )
        return [tainted_from_row(r) for r in rows]

    def tainted_counts(self) -> dict[str, int]:
        rows = self._all(
            "SELECT model, count(DISTINCT partition_start) FROM tainted_partitions "
            "WHERE cleared_at IS NULL GROUP BY model"
        )
        return {r[0]: int(r[1]) for r in rows}

    def cleared_by_run(self, run_id: str) -> list[tuple[str, int, int]]:
        rows = self._all(
            "SELECT DISTINCT m.model, m.partition_start, m.partition_end "
            "FROM tainted_partitions m JOIN attempts a ON a.attempt_id = m.cleared_by "
            "WHERE a.run_id = %s AND NOT EXISTS (SELECT 1 FROM tainted_partitions o "
            " WHERE o.model = m.model AND o.partition_start = m.partition_start "
            " AND o.cleared_at IS NULL) ORDER BY m.model, m.partition_start",
            (run_id,),
        )
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    def readers(self, model: str, upstream: str, windows: Sequence[tuple[int, int]]) -> list[Read]:
        with self._read_tx() as con:
            return _readers(con, model, upstream, windows)

    def record_reads(
        self, consumer: str, model: str, windows: Sequence[tuple[int, int]], at: str
    ) -> None:
        with self._tx() as con, con.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO consumer_reads (consumer, model, range_start, range_end, at) "
                "VALUES (%s, %s, %s, %s, %s)",
                [(consumer, model, start, end, at) for start, end in windows],
            )

    def consumed(self, model: str, start: int, end: int) -> dict[int, list[str]]:
        rows = self._all(
            "SELECT DISTINCT p.partition_start, r.consumer FROM partitions p "
            "JOIN consumer_reads r ON r.model = p.model AND r.range_start < p.partition_end "
            " AND r.range_end > p.partition_start AND r.at >= p.published_at "
            "LEFT JOIN outbox o ON o.id = r.outbox_id "
            "WHERE p.model = %s AND p.partition_start >= %s AND p.partition_start < %s "
            "AND p.attempt_id IS NOT NULL "
            "AND (r.outbox_id IS NULL OR o.delivered_at IS NOT NULL) "
            "ORDER BY p.partition_start, r.consumer",
            (model, start, end),
        )
        found: dict[int, list[str]] = {}
        for row in rows:
            found.setdefault(int(row[0]), []).append(row[1])
        return found


def _readers(
    con: psycopg.Connection[Any], model: str, upstream: str, windows: Sequence[tuple[int, int]]
) -> list[Read]:
    if not windows:
        return []
    span = (min(s for s, _ in windows), max(e for _, e in windows))
    return reads_in(model, con.execute(READERS, (upstream, model, span[1], span[0])), windows)


def hold_marks(con: psycopg.Connection[Any], exclusive: bool) -> None:
    """Take the marks lock for the rest of the transaction (see MARKS_LOCK)."""
    if exclusive:
        con.execute("SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))", (MARKS_LOCK,))
    else:
        con.execute(
            "SELECT pg_advisory_xact_lock_shared(%s, hashtext(current_schema()))", (MARKS_LOCK,)
        )


# The marks a publish of %(attempt)s clears: those on the partition it replaces whole (an
# overwrite, or a recovery's rebuild; a merge or an append keeps the rows a mark is about),
# made before the attempt began (one computed before the taint was declared may have read
# what the taint is about). As sqlite_taints.CLEAR_REPLACED.
CLEAR_REPLACED = (
    "UPDATE tainted_partitions SET cleared_at = %(at)s, cleared_by = %(attempt)s "
    "WHERE cleared_at IS NULL AND attempt_id <> %(attempt)s "
    "AND (model, partition_start) = "
    " (SELECT model, partition_start FROM attempts WHERE attempt_id = %(attempt)s) "
    "AND marked_at < (SELECT started_at FROM attempts WHERE attempt_id = %(attempt)s) "
    "AND EXISTS (SELECT 1 FROM attempts a JOIN runs r ON r.run_id = a.run_id "
    " JOIN versions v ON v.version_id = a.version_id WHERE a.attempt_id = %(attempt)s "
    " AND (r.kind = 'recover' OR v.spec::jsonb ->> 'write_mode' = 'overwrite'))"
)


def settle_taints(con: psycopg.Connection[Any], attempt_id: str, at: str) -> None:
    """On publishing `attempt_id`: clear the marks of what it replaces, and mark it with the
    taints of the upstream partitions it read (a run told to warn, not block)."""
    con.execute(CLEAR_REPLACED, {"at": at, "attempt": attempt_id})
    con.execute(
        "INSERT INTO tainted_partitions (taint_id, model, partition_start, "
        "partition_end, attempt_id, depth, via_model, via_start, marked_at) "
        "SELECT t.taint_id, a.model, a.partition_start, a.partition_end, a.attempt_id, "
        "min(t.depth) + 1, t.model, min(t.partition_start), %s "
        "FROM attempts a JOIN attempt_inputs i ON i.attempt_id = a.attempt_id "
        "AND i.kind = 'model' "
        "JOIN tainted_partitions t ON t.model = i.upstream AND t.cleared_at IS NULL "
        "AND t.partition_start < i.range_end AND t.partition_end > i.range_start "
        "WHERE a.attempt_id = %s "
        "GROUP BY t.taint_id, t.model, a.model, a.partition_start, a.partition_end, "
        "a.attempt_id ON CONFLICT DO NOTHING",
        (at, attempt_id),
    )
