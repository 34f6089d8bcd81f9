"""The connection shared by the SQLite ledger's table groups."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tidegate.domain.errors import BusyError, OperationFailed, StateStoreError, TidegateError
from tidegate.state.ledger_tables import LedgerTables, Params


class SQLiteTables(LedgerTables):
    """The connection that every table group of the SQLite ledger shares. Statements run as
    written: the shared table groups write them in SQLite's placeholder style."""

    path: Path
    _con: sqlite3.Connection
    # One connection shared by the coordinator and worker threads, one statement at a time.
    _lock: threading.RLock

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as error:
            raise ledger_failure(self.path, error) from None

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors():
            self._con.execute("BEGIN IMMEDIATE")
            try:
                yield self._con
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            self._con.execute("COMMIT")

    @contextmanager
    def _read_tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors():
            yield self._con

    def _all(self, query: str, params: Params = ()) -> list[sqlite3.Row]:
        with self._lock, self._errors():
            return list(self._con.execute(query, params).fetchall())

    def _one(self, query: str, params: Params = ()) -> sqlite3.Row | None:
        with self._lock, self._errors():
            row: sqlite3.Row | None = self._con.execute(query, params).fetchone()
        return row


def ledger_failure(path: Path, error: sqlite3.DatabaseError) -> TidegateError:
    """What a failed ledger statement means to the user: another process holding the ledger's
    write lock past the busy timeout is busy (exit 4, retry); a full or failing disk failed the
    operation (exit 1: the file is fine, free space and resume); anything else makes the ledger
    unusable as it is (exit 2)."""
    name = error.sqlite_errorname or ""
    if name in ("SQLITE_BUSY", "SQLITE_LOCKED"):
        return BusyError(
            f"state store {path} is locked by another process ({error}); nothing was changed "
            "by this statement — retry once that process is done"
        )
    if name == "SQLITE_FULL" or name.startswith("SQLITE_IOERR"):
        return OperationFailed(
            f"state store {path} could not be written: the disk is full or failing ({error}); "
            "nothing of the statement stayed — free space, then resume"
        )
    return StateStoreError(f"state store {path} failed ({error}); nothing of the statement stayed")
