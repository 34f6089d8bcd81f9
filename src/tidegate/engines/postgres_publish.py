"""PostgreSQL's publish: the staged rows into a partition by the write mode, with the commit
markers, in one transaction (docs/design.md §9). The flow is SqlEngine.publish; here, PostgreSQL's
transaction. The staging table is dropped in the same transaction: a staging table and its
published rows never both exist after a commit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg

from tidegate.domain.errors import ContentionError, EngineError
from tidegate.engines.sql_engine import SqlEngine
from tidegate.sql import postgres as pg

if TYPE_CHECKING:
    from tidegate.engines.postgres_connection import Warehouse


class PostgresPublish(SqlEngine):
    """The publishing hooks of PostgresEngine, which provides the connection and the schema
    helper declared here."""

    warehouse: Warehouse
    _con: psycopg.Connection[tuple[Any, ...]]

    if TYPE_CHECKING:  # provided by PostgresEngine

        def _ensure_schema(self, schema: str) -> None: ...

    def _ensure_target_schema(self, schema: str | None) -> None:
        self._ensure_schema(schema or self.warehouse.schema)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        try:
            with self._con.transaction():
                yield
        except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure) as error:
            # the commit lost to a concurrent transaction: nothing was written, try again
            raise ContentionError(f"postgres: {str(error).strip().splitlines()[0]}") from error
        except psycopg.Error as error:
            # the commit itself failed (the statements raise EngineError): nothing was written
            raise EngineError(f"postgres: {str(error).strip().splitlines()[0]}") from error

    @contextlib.contextmanager
    def _publish_transaction(self, staging: str) -> Iterator[None]:
        with self._transaction():
            yield
            self._run(self._drop_statement(staging))

    def _changed_rows(self, cursor: Any) -> int:
        return int(cursor.rowcount)

    def _plan_update(self, statement: str, params: Any) -> None:
        # EXPLAIN plans without running: allowed in a read-only transaction
        self._run(f"EXPLAIN {statement}", params).fetchall()

    row_locks = True

    def _limit_transaction(
        self, lock_timeout: float | None, statement_timeout: float | None
    ) -> None:
        # whatever the server's or the role's default: under REPEATABLE READ the UPDATE would
        # fail on a row the application changed meanwhile instead of computing it anew
        self._run("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        # SET LOCAL: the bounds end with the transaction, the session keeps its own
        for name, seconds in (
            ("lock_timeout", lock_timeout),
            ("statement_timeout", statement_timeout),
        ):
            if seconds is not None:
                self._run(pg.set_local_setting(), [name, f"{max(1, round(seconds * 1000))}ms"])

    def _after_publish(self, staging: str) -> None:
        """Nothing: the staging table went inside the publish's transaction."""
