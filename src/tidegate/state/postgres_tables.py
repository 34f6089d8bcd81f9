"""The connections shared by the PostgreSQL ledger's table groups, and its transactions."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from tidegate.state.postgres_connect import failure
from tidegate.state.postgres_pool import Connections
from tidegate.state.postgres_rows import Row

# Every write transaction moves the ledger clock as its last statement, so that the ledger
# stamp changes exactly when a change commits (the row lock is held only for the commit).
TICK = "UPDATE ledger_clock SET changes = changes + 1 WHERE id = 1"


class PostgresTables:
    """The connections that every table group of the PostgreSQL ledger shares.

    Isolation: READ COMMITTED, PostgreSQL's default, for every transaction. Each method is one
    transaction; state moves are compare-and-set UPDATEs (`... WHERE state = ...`), which
    PostgreSQL re-evaluates on the newest row version after waiting for a concurrent writer,
    so two processes cannot both move one attempt. Where a method must see a stable picture
    across statements against concurrent writers (a taint and the publishes), it takes a lock
    rather than a stricter isolation level: no serialization failures to retry."""

    _pool: Connections
    where: str

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except psycopg.OperationalError as error:
            raise failure(error, self.where, "failed") from None

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        """One write transaction; nothing of it stays if its body raises."""
        with self._errors(), self._pool.session() as con, con.transaction():
            yield con
            con.execute(TICK)

    @contextmanager
    def _read_tx(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction for reads that take several statements."""
        with self._errors(), self._pool.session() as con, con.transaction():
            yield con

    def _all(self, query: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Row]:
        with self._errors(), self._pool.session() as con:
            return con.execute(query, params or None).fetchall()

    def _one(self, query: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> Row | None:
        with self._errors(), self._pool.session() as con:
            row: Row | None = con.execute(query, params or None).fetchone()
        return row
