"""The connection shared by the SQLite ledger's table groups."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tidegate.state.ledger_tables import LedgerTables, Params


class SQLiteTables(LedgerTables):
    """The connection that every table group of the SQLite ledger shares. Statements run as
    written: the shared table groups write them in SQLite's placeholder style."""

    _con: sqlite3.Connection
    # One connection shared by the coordinator and worker threads, one statement at a time.
    _lock: threading.RLock

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._con.execute("BEGIN IMMEDIATE")
            try:
                yield self._con
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            self._con.execute("COMMIT")

    @contextmanager
    def _read_tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._con

    def _all(self, query: str, params: Params = ()) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._con.execute(query, params).fetchall())

    def _one(self, query: str, params: Params = ()) -> sqlite3.Row | None:
        with self._lock:
            row: sqlite3.Row | None = self._con.execute(query, params).fetchone()
        return row
