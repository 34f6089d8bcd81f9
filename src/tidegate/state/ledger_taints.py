"""Ledger tables of taints (contamination marks and their lineage) and of consumers' reads,
shared by both stores. What differs is PostgreSQL's marks lock (postgres_taints.hold_marks)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tidegate.domain.ids import new_stale_id
from tidegate.domain.staleness import Reader, Replacement, stale_marks
from tidegate.domain.taint import (
    Mark,
    MarkKind,
    Read,
    Taint,
    TaintedPartition,
    propagate,
    ranges_by_model,
    reads_in,
)
from tidegate.state.base import Event, Told
from tidegate.state.codec import mark_params, taint_params, tainted_from_row
from tidegate.state.ledger_tables import LedgerTables
from tidegate.state.ledger_versions import insert_event

OPEN_MARKS = (
    "SELECT m.*, t.reason, t.model AS origin, t.kind FROM tainted_partitions m "
    "JOIN taints t ON t.taint_id = m.taint_id WHERE m.cleared_at IS NULL "
)

INSERT_TAINT = (
    "INSERT INTO taints (taint_id, model, grain, range_start, range_end, reason, actor, "
    "created_at, kind, run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

INSERT_MARK = (
    "INSERT INTO tainted_partitions (taint_id, model, partition_start, partition_end, "
    "attempt_id, depth, via_model, via_start, marked_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)

# The published partition an attempt about to publish replaces, and both contents.
REPLACES = (
    "SELECT p.attempt_id, p.checksum, a.checksum, a.model, a.grain, a.partition_start, "
    "a.partition_end, a.run_id FROM attempts a JOIN partitions p ON p.model = a.model "
    "AND p.partition_start = a.partition_start WHERE a.attempt_id = ? "
    "AND p.attempt_id IS NOT NULL AND p.attempt_id <> a.attempt_id"
)

# The published attempts of a partition whose content differs from :checksum.
OUTDATED = (
    "SELECT attempt_id FROM attempts WHERE model = ? AND partition_start = ? "
    "AND state = 'published' AND attempt_id <> ? AND (checksum IS NULL OR checksum <> ?)"
)

# Published partitions of any model whose attempt read a window of an upstream model.
READERS_OF = (
    "SELECT p.model, p.partition_start, p.partition_end, p.attempt_id, i.upstream_attempts "
    "FROM attempt_inputs i JOIN partitions p ON p.attempt_id = i.attempt_id "
    "WHERE i.upstream = ? AND i.kind = 'model' AND i.range_start < ? AND i.range_end > ? "
    "ORDER BY p.model, p.partition_start"
)

# Published partitions of a model whose attempt read a window of an upstream model.
READERS = (
    "SELECT p.partition_start, p.partition_end, p.attempt_id, i.range_start, i.range_end "
    "FROM attempt_inputs i JOIN partitions p ON p.attempt_id = i.attempt_id "
    "WHERE i.upstream = ? AND i.kind = 'model' AND p.model = ? "
    "AND i.range_start < ? AND i.range_end > ? ORDER BY p.partition_start"
)

# The kind of run and the spec of the version an attempt was made by.
MADE_BY = (
    "SELECT r.kind, v.spec FROM attempts a JOIN runs r ON r.run_id = a.run_id "
    "JOIN versions v ON v.version_id = a.version_id WHERE a.attempt_id = ?"
)

# The marks a publish of :attempt clears, when it replaces its partition whole (see
# replaces_whole): those on that partition whose taint was declared before the attempt began
# (one computed before the taint was declared may have read what the taint is about). The
# order is that of the ids, which carry the real instant they were made (`taint-`/`stale-`
# then that instant, `att-` then its own): the ledger's times follow each command's clock, and
# a command run `--as-of` a past day would otherwise never clear a mark made today, nor one its
# own start-up made at the very instant of its fixed clock.
CLEAR_REPLACED = (
    "UPDATE tainted_partitions SET cleared_at = :at, cleared_by = :attempt "
    "WHERE cleared_at IS NULL AND attempt_id <> :attempt "
    "AND (model, partition_start) = "
    " (SELECT model, partition_start FROM attempts WHERE attempt_id = :attempt) "
    "AND substr(taint_id, 7, 21) < substr(:attempt, 5, 21)"
)

# An attempt on publishing inherits the open marks of the upstream partitions it read.
INHERIT_MARKS = (
    "INSERT INTO tainted_partitions (taint_id, model, partition_start, "
    "partition_end, attempt_id, depth, via_model, via_start, marked_at) "
    "SELECT t.taint_id, a.model, a.partition_start, a.partition_end, a.attempt_id, "
    "min(t.depth) + 1, t.model, min(t.partition_start), ? "
    "FROM attempts a JOIN attempt_inputs i ON i.attempt_id = a.attempt_id "
    "AND i.kind = 'model' "
    "JOIN tainted_partitions t ON t.model = i.upstream AND t.cleared_at IS NULL "
    "AND t.partition_start < i.range_end AND t.partition_end > i.range_start "
    "WHERE a.attempt_id = ? "
    "GROUP BY t.taint_id, t.model, a.model, a.partition_start, a.partition_end, "
    "a.attempt_id ON CONFLICT DO NOTHING"
)


class TaintTables(LedgerTables):
    def _hold_marks(self, con: Any, exclusive: bool) -> None:
        """Keep marks and publishes apart for the rest of the transaction; nothing to do
        where a write transaction holds the whole ledger (SQLite)."""

    if TYPE_CHECKING:  # the outbox table group's, in the same store

        def _insert_outbox(self, con: Any, values: tuple[str, str, str, str]) -> int: ...

    def taint(
        self,
        taint: Taint,
        order: Sequence[str],
        parents: Mapping[str, Sequence[str]],
        tell: Callable[[Sequence[Mark]], Told] | None = None,
    ) -> list[Mark]:
        with self._tx() as con:
            self._hold_marks(con, exclusive=True)
            origin = [
                Mark(taint.model, r[0], r[1], r[2], 0)
                for r in con.execute(
                    "SELECT partition_start, partition_end, attempt_id FROM partitions "
                    "WHERE model = ? AND partition_start >= ? AND partition_start < ? "
                    "AND attempt_id IS NOT NULL ORDER BY partition_start",
                    (taint.model, taint.start, taint.end),
                )
            ]
            if not origin:
                return []
            marks = propagate(origin, order, parents, lambda m, u, w: readers_in(con, m, u, w))
            self._record_marks(con, taint, marks, tell)
        return marks

    def mark(
        self,
        taint: Taint,
        marks: Sequence[Mark],
        tell: Callable[[Sequence[Mark]], Told] | None = None,
    ) -> None:
        with self._tx() as con:
            self._hold_marks(con, exclusive=True)
            self._record_marks(con, taint, marks, tell)

    def _record_marks(
        self,
        con: Any,
        taint: Taint,
        marks: Sequence[Mark],
        tell: Callable[[Sequence[Mark]], Told] | None,
    ) -> None:
        con.execute(INSERT_TAINT, taint_params(taint))
        con.executemany(INSERT_MARK, [mark_params(taint, m) for m in marks])
        if tell is not None:
            told = tell(marks)
            insert_event(con, told.event)
            for event in told.reached:
                insert_event(con, event)
            for target, payload in told.notices:
                self._insert_outbox(con, (target, payload, taint.at, taint.at))

    def marks_of_run(self, run_id: str, kind: MarkKind) -> list[TaintedPartition]:
        rows = self._all(
            OPEN_MARKS + "AND t.run_id = ? AND t.kind = ? "
            "ORDER BY m.depth, m.model, m.partition_start",
            (run_id, kind.value),
        )
        return [tainted_from_row(r) for r in rows]

    def open_taints(
        self, model: str | None = None, start: int | None = None, end: int | None = None
    ) -> list[TaintedPartition]:
        rows = self._all(
            OPEN_MARKS + "AND (CAST(:model AS TEXT) IS NULL OR m.model = :model) "
            "AND (CAST(:start AS BIGINT) IS NULL OR m.partition_end > :start) "
            "AND (CAST(:end AS BIGINT) IS NULL OR m.partition_start < :end) "
            "ORDER BY m.model, m.partition_start, m.depth",
            {"model": model, "start": start, "end": end},
        )
        return [tainted_from_row(r) for r in rows]

    def tainted_counts(self) -> dict[str, dict[MarkKind, int]]:
        rows = self._all(
            "SELECT m.model, t.kind, count(DISTINCT m.partition_start) "
            "FROM tainted_partitions m JOIN taints t ON t.taint_id = m.taint_id "
            "WHERE m.cleared_at IS NULL GROUP BY m.model, t.kind"
        )
        counts: dict[str, dict[MarkKind, int]] = {}
        for model, kind, count in rows:
            counts.setdefault(model, {})[MarkKind(kind)] = int(count)
        return counts

    def cleared_by_run(self, run_id: str) -> list[tuple[str, int, int]]:
        rows = self._all(
            "SELECT DISTINCT m.model, m.partition_start, m.partition_end "
            "FROM tainted_partitions m JOIN attempts a ON a.attempt_id = m.cleared_by "
            "WHERE a.run_id = ? AND NOT EXISTS (SELECT 1 FROM tainted_partitions o "
            " WHERE o.model = m.model AND o.partition_start = m.partition_start "
            " AND o.cleared_at IS NULL) ORDER BY m.model, m.partition_start",
            (run_id,),
        )
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    def readers(self, model: str, upstream: str, windows: Sequence[tuple[int, int]]) -> list[Read]:
        with self._read_tx() as con:
            return readers_in(con, model, upstream, windows)

    def record_reads(
        self, consumer: str, model: str, windows: Sequence[tuple[int, int]], at: str
    ) -> None:
        with self._tx() as con:
            con.executemany(
                "INSERT INTO consumer_reads (consumer, model, range_start, range_end, at) "
                "VALUES (?, ?, ?, ?, ?)",
                [(consumer, model, start, end, at) for start, end in windows],
            )

    def consumed(self, model: str, start: int, end: int) -> dict[int, list[str]]:
        rows = self._all(
            "SELECT DISTINCT p.partition_start, r.consumer FROM partitions p "
            "JOIN consumer_reads r ON r.model = p.model AND r.range_start < p.partition_end "
            " AND r.range_end > p.partition_start AND r.at >= p.published_at "
            "LEFT JOIN outbox o ON o.id = r.outbox_id "
            "WHERE p.model = ? AND p.partition_start >= ? AND p.partition_start < ? "
            "AND p.attempt_id IS NOT NULL "
            "AND (r.outbox_id IS NULL OR o.delivered_at IS NOT NULL) "
            "ORDER BY p.partition_start, r.consumer",
            (model, start, end),
        )
        found: dict[int, list[str]] = {}
        for row in rows:
            found.setdefault(int(row[0]), []).append(row[1])
        return found

    def _replaced_by(self, con: Any, attempt_id: str) -> Replacement | None:
        """The published partition `attempt_id` is about to replace, if any."""
        row = con.execute(REPLACES, (attempt_id,)).fetchone()
        if row is None:
            return None
        return Replacement(
            model=row[3],
            grain=row[4],
            start=int(row[5]),
            end=int(row[6]),
            old_attempt=row[0],
            new_attempt=attempt_id,
            old_checksum=row[1],
            new_checksum=row[2],
            run_id=row[7],
        )

    def _mark_stale(self, con: Any, replaced: Replacement, at: str) -> None:
        """Mark what the replacement leaves stale downstream, in the publish's transaction."""
        if not replaced.changed:
            return
        outdated = {
            r[0]
            for r in con.execute(
                OUTDATED,
                (replaced.model, replaced.start, replaced.new_attempt, replaced.new_checksum),
            )
        }
        marks = stale_marks(replaced, outdated, lambda m, s, e: readers_of(con, m, s, e))
        if not marks:
            return
        cause = Taint(
            taint_id=new_stale_id(),
            model=replaced.model,
            grain=replaced.grain,
            start=replaced.start,
            end=replaced.end,
            reason=replaced.reason(),
            actor="tidegate",
            at=at,
            kind=MarkKind.STALE,
            run_id=replaced.run_id,
        )
        self._record_marks(con, cause, marks, None)
        for model, reached in ranges_by_model(marks).items():
            insert_event(
                con,
                Event(
                    kind="stale",
                    actor=cause.actor,
                    at=at,
                    model=model,
                    run_id=replaced.run_id,
                    reason=cause.reason,
                    detail={
                        "stale_id": cause.taint_id,
                        "partitions": sum(1 for m in marks if m.model == model),
                        "ranges": [list(r) for r in reached],
                    },
                ),
            )

    def _settle_taints(self, con: Any, attempt_id: str, at: str) -> None:
        """On publishing `attempt_id`: clear the marks of what it replaces, and mark it with
        the taints of the upstream partitions it read (a run told to warn, not block)."""
        made = con.execute(MADE_BY, (attempt_id,)).fetchone()
        if made is not None and replaces_whole(made[0], made[1]):
            con.execute(CLEAR_REPLACED, {"at": at, "attempt": attempt_id})
        con.execute(INHERIT_MARKS, (at, attempt_id))


def readers_in(
    con: Any, model: str, upstream: str, windows: Sequence[tuple[int, int]]
) -> list[Read]:
    if not windows:
        return []
    span = (min(s for s, _ in windows), max(e for _, e in windows))
    return reads_in(model, con.execute(READERS, (upstream, model, span[1], span[0])), windows)


def readers_of(con: Any, upstream: str, start: int, end: int) -> list[Reader]:
    return [
        Reader(r[0], int(r[1]), int(r[2]), r[3], tuple(json.loads(r[4])))
        for r in con.execute(READERS_OF, (upstream, end, start))
    ]


def any_open_taint(con: Any) -> bool:
    found = con.execute("SELECT 1 FROM tainted_partitions WHERE cleared_at IS NULL LIMIT 1")
    return found.fetchone() is not None


def replaces_whole(run_kind: str, spec: str) -> bool:
    """Whether a publish replaces its partition whole: an overwrite, or a recovery's rebuild
    (a merge or an append keeps the rows a mark is about)."""
    return run_kind == "recover" or json.loads(spec).get("write_mode") == "overwrite"
