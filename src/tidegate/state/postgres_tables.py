"""The connections shared by the PostgreSQL ledger's table groups, and its transactions."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import psycopg

from tidegate.state.ledger_tables import LedgerTables, Params
from tidegate.state.postgres_connect import statement_failure
from tidegate.state.postgres_pool import Connections
from tidegate.state.postgres_rows import Row

# Every write transaction moves the ledger clock as its last statement, so that the ledger
# stamp changes exactly when a change commits (the row lock is held only for the commit).
TICK = "UPDATE ledger_clock SET changes = changes + 1 WHERE id = 1"

# SQLite's placeholders in the shared statements: `?`, and `:name` (not a `::type` cast).
QMARK = re.compile(r"\?")
NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@lru_cache(maxsize=512)
def placeholders(query: str) -> str:
    """The statement with SQLite's placeholders written as psycopg's (`%s`, `%(name)s`);
    text already in psycopg's style is left as it is. The statements hold no literal `%`."""
    return NAMED.sub(r"%(\1)s", QMARK.sub("%s", query))


class Session:
    """One connection of a transaction, running statements written in either style."""

    def __init__(self, con: psycopg.Connection[Row]) -> None:
        self.raw = con

    def execute(self, query: str, params: Params = ()) -> psycopg.Cursor[Row]:
        return self.raw.execute(placeholders(query), params or None)

    def executemany(self, query: str, rows: Sequence[Any]) -> None:
        if rows:
            with self.raw.cursor() as cursor:
                cursor.executemany(placeholders(query), rows)


class PostgresTables(LedgerTables):
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
            raise statement_failure(error, self.where) from None

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        """One write transaction; nothing of it stays if its body raises."""
        with self._errors(), self._pool.session() as con, con.transaction():
            yield Session(con)
            con.execute(TICK)

    @contextmanager
    def _read_tx(self) -> Iterator[Session]:
        """One transaction for reads that take several statements."""
        with self._errors(), self._pool.session() as con, con.transaction():
            yield Session(con)

    def _all(self, query: str, params: Params = ()) -> list[Row]:
        with self._errors(), self._pool.session() as con:
            return con.execute(placeholders(query), params or None).fetchall()

    def _one(self, query: str, params: Params = ()) -> Row | None:
        with self._errors(), self._pool.session() as con:
            row: Row | None = con.execute(placeholders(query), params or None).fetchone()
        return row
