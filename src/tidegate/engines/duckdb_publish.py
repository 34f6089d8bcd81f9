"""DuckDB's publish: the staged rows into a partition by the write mode, with the commit
markers, in one transaction (docs/design.md §9). The flow is SqlEngine.publish; here, DuckDB's
transaction and the staging table dropped after the commit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import duckdb

from tidegate.domain.errors import EngineError
from tidegate.engines.base import Target
from tidegate.engines.sql_engine import SqlEngine
from tidegate.sql import statements as sql


class DuckDBPublish(SqlEngine):
    """The publishing hooks of DuckDBEngine, which provides the connection."""

    _con: Any

    def _ensure_target_schema(self, schema: str | None) -> None:
        if schema is not None:
            self._run(sql.create_schema(schema))

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._run("BEGIN TRANSACTION")
        try:
            yield
            self._run("COMMIT")
        except BaseException:
            # DuckDB may have aborted the transaction already; the first error is the one to tell
            with contextlib.suppress(duckdb.Error):
                self._con.execute("ROLLBACK")
            raise

    def _publish_transaction(self, staging: str) -> contextlib.AbstractContextManager[None]:
        return self._transaction()

    def _changed_rows(self, cursor: Any) -> int:
        return int(cursor.fetchone()[0])

    def _hold_target(self, target: Target) -> None:
        """Nothing: the one writing process holds the whole file."""

    def _after_publish(self, staging: str) -> None:
        # One transaction writes one database: the in-memory staging table goes after the
        # commit. It is published already, so failing to drop it must not fail the publish;
        # the slot's next unit replaces it.
        with contextlib.suppress(EngineError):
            self.drop_staging(staging)
