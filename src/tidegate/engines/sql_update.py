"""The `update` write mode on the SQL warehouses (DuckDB, PostgreSQL): an existing table's
columns set, key range by key range, in one transaction per range that also audits the result
and inserts the range's commit marker (docs/design.md §9): a crash leaves a range either done and
marked, or untouched, and no transaction holds row locks of two ranges.

No staging: the values are computed by the UPDATE itself, on each row as it is once locked (the
range's differing rows locked first in key order where the engine has row locks, READ COMMITTED
so each statement sees what committed before it), so
the application writing the same rows meanwhile never has a newer value replaced by an older
one. The audit runs after the UPDATE in the same transaction: no row of the range may still
differ from its expression, and every declared check must hold; otherwise the transaction rolls
back and nothing is written.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError
from tidegate.domain.model import CheckSpec, UpdateSpec
from tidegate.engines.base import CommitMarker
from tidegate.engines.sql_queries import SqlQueries
from tidegate.sql import statements as sql
from tidegate.sql import updates as update_sql


@dataclass(frozen=True)
class RangeAudit:
    """What the update's transaction found in one key range after its UPDATE."""

    start: int
    rows: int
    updated: int
    # per assignment: rows whose column still differs from its expression
    differing: tuple[int, ...]
    # per check: violating rows
    violations: tuple[int, ...]

    @property
    def checksum(self) -> Checksum:
        """What a marker records of an updated range: its rows. Update mode proves itself by
        its reconciliation, not by a content checksum (the application changes the rows)."""
        return Checksum(self.rows, 0)


class UpdateRefused(EngineError):
    """The audit in the update's transaction failed: it rolled back, nothing was written."""

    def __init__(self, message: str, audits: Sequence[RangeAudit]) -> None:
        super().__init__(message)
        self.audits = tuple(audits)


class RangeUpdates(SqlQueries):
    """Update mode for an engine that speaks SQL; the engine gives its transaction."""

    # whether other sessions' writers hold row locks the update may wait for (PostgreSQL):
    # then the range's differing rows are locked in key order before the UPDATE
    row_locks = False

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[None]:
        """One transaction: its statements commit together or not at all."""

    @staticmethod
    @abstractmethod
    def _insert_markers() -> str:
        """Insert a publish's commit markers (each column bound to a list of values)."""

    @abstractmethod
    def _changed_rows(self, cursor: Any) -> int:
        """Rows an UPDATE just changed, from what running it returned."""

    def _limit_transaction(
        self, lock_timeout: float | None, statement_timeout: float | None
    ) -> None:
        """Set up the update's transaction before its first statement: READ COMMITTED (each
        statement sees what committed before it, so a row the application changed meanwhile is
        computed from its new values) and the bounds of its lock waits and statements; an engine
        without those settings (DuckDB: one writing process, no row locks to wait for) ignores
        them."""

    def _plan_update(self, statement: str, params: Any) -> None:
        """Plan an UPDATE without running it, where the engine can on a read-only session
        (PostgreSQL: EXPLAIN binds the assignments to the columns' types)."""

    def bind_problem(
        self,
        update: UpdateSpec,
        key: str,
        checks: Sequence[CheckSpec],
        types: Mapping[str, str],
    ) -> str | None:
        """Why the update's statements cannot run on its table (None: they can): its audit
        (every expression against its column, every check) bound over an empty range, each
        expression computed on one row and cast to its column's type (`types`), and the UPDATE
        planned where the engine can. Read-only: nothing is written."""
        assignments = update.assignments
        empty = {"start": 0, "end": 0}
        audit = update_sql.audit_range(update.table, key, assignments, checks, self.flavor)
        probe = update_sql.probe_values(
            update.table, [(c, e, types.get(c)) for c, e in assignments], self.flavor
        )
        write = update_sql.update_range(update.table, key, assignments, self.flavor)
        try:
            self._one(audit, self._bind(empty, audit))
            self._run(probe, self._bind({}, probe)).fetchall()
            self._plan_update(write, self._bind(empty, write))
        except EngineError as error:
            return str(error)
        return None

    def null_keys(self, table: str, key: str) -> int:
        """Rows of the table whose key is NULL (in no key range). Read-only."""
        return int(self._one(update_sql.null_keys(table, key, self.flavor))[0])

    def key_bounds(self, table: str, key: str) -> tuple[int, int] | None:
        """The smallest and largest key of the table (None when it has no rows). Read-only."""
        low, high = self._one(update_sql.key_bounds(table, key, self.flavor))
        return None if low is None else (int(low), int(high))

    def rows_per_chunk(
        self, table: str, key: str, chunk_size: int, window: tuple[int, int]
    ) -> dict[int, int]:
        """Rows per chunk (by its first key) in the window of keys. Read-only."""
        statement = update_sql.rows_per_chunk(table, key, chunk_size, self.flavor)
        bounds = {"start": window[0], "end": window[1]}
        return {
            int(first): int(rows)
            for first, rows in self._run(statement, self._bind(bounds, statement)).fetchall()
        }

    def update_range(
        self,
        update: UpdateSpec,
        key: str,
        checks: Sequence[CheckSpec],
        marker: CommitMarker,
        refusal: Callable[[RangeAudit], str | None],
        timeouts: tuple[float | None, float | None] = (None, None),
    ) -> RangeAudit:
        """Update the marker's key range, audit it, and — unless `refusal` finds a reason in
        the audit — insert the marker (carrying the range's rows), in one transaction of its
        own: one key range per transaction, so no range's row locks are held while another
        range is updated. `timeouts`: (lock, statement) seconds for this transaction.

        Transactional; raises UpdateRefused (with the audit) when refused, ContentionError on
        a lock or statement timeout, a deadlock or a serialization failure, EngineError
        otherwise; nothing is written then."""
        assignments = update.assignments
        write = self._statement(
            ("update", update.table, key, assignments),
            lambda: update_sql.update_range(update.table, key, assignments, self.flavor),
        )
        audit = self._statement(
            ("audit update", update.table, key, assignments, tuple(c.name for c in checks)),
            lambda: update_sql.audit_range(update.table, key, assignments, checks, self.flavor),
        )
        bounds = {"start": marker.partition_start, "end": marker.partition_end}
        with self._transaction():
            self._limit_transaction(*timeouts)
            if self.row_locks:
                lock = self._statement(
                    ("lock update", update.table, key, assignments),
                    lambda: update_sql.lock_range(update.table, key, assignments, self.flavor),
                )
                self._run(lock, self._bind(bounds, lock)).fetchall()
            updated = self._changed_rows(self._run(write, self._bind(bounds, write)))
            row = self._one(audit, self._bind(bounds, audit))
            rows, measured = int(row[0]), [int(v) for v in row[1:]]
            found = RangeAudit(
                marker.partition_start,
                rows,
                updated,
                tuple(measured[: len(assignments)]),
                tuple(measured[len(assignments) :]),
            )
            reason = refusal(found)
            if reason is not None:
                raise UpdateRefused(reason, [found])
            marked = replace(marker, checksum=str(found.checksum))
            self._run(
                self._statement(("markers",), self._insert_markers),
                {n: [getattr(marked, n)] for n in sql.MARKER_COLUMNS},
            )
        return found
