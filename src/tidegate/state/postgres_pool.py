"""The PostgreSQL ledger's connections in one process. A thread takes one for a transaction and
gives it back: the threads of a backfill (its workers and its publisher) commit in parallel
instead of queueing behind one connection, and a connection the server dropped is replaced by
the next transaction."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from tidegate.domain.errors import StateStoreError
from tidegate.state.postgres_connect import PostgresTarget, connect, failure
from tidegate.state.postgres_rows import named_rows

# Idle connections kept for reuse; more are closed when given back.
IDLE_KEPT = 4


class Connections:
    """Autocommit connections to the ledger's schema; each transaction opens its own."""

    def __init__(self, target: PostgresTarget, env: Mapping[str, str] | None = None) -> None:
        self._target = target
        self._env = env
        self._idle: list[psycopg.Connection[Any]] = []
        self._guard = threading.Lock()
        self._held = threading.local()
        self._closed = False

    @contextmanager
    def session(self) -> Iterator[psycopg.Connection[Any]]:
        """This thread's connection: the one it already holds (a method inside `reading`, one
        method calling another), or one taken for the time of the block."""
        held: psycopg.Connection[Any] | None = getattr(self._held, "con", None)
        if held is not None:
            yield held
            return
        con = self._take()
        self._held.con = con
        try:
            yield con
        finally:
            self._held.con = None
            self._give(con)

    def close(self) -> None:
        with self._guard:
            self._closed = True
            idle, self._idle = self._idle, []
        for con in idle:
            con.close()

    def _take(self) -> psycopg.Connection[Any]:
        with self._guard:
            if self._closed:
                raise StateStoreError(f"state store {self._target.where} is closed")
            if self._idle:
                return self._idle.pop()
        return self._open()

    def _give(self, con: psycopg.Connection[Any]) -> None:
        usable = not con.closed and con.info.transaction_status == TransactionStatus.IDLE
        with self._guard:
            if usable and not self._closed and len(self._idle) < IDLE_KEPT:
                self._idle.append(con)
                return
        con.close()

    def _open(self) -> psycopg.Connection[Any]:
        con = connect(self._target, self._env)
        try:
            con.row_factory = named_rows
            # the session's only schema: the ledger's tables never resolve to another schema's
            con.execute(
                "SELECT set_config('search_path', quote_ident(%s), false)", (self._target.schema,)
            )
        except psycopg.Error as error:
            con.close()
            raise failure(error, self._target.where, "cannot connect") from None
        return con
