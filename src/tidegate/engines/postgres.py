"""PostgreSQL: a warehouse on a server (docs/design.md §7). Models run and publish inside it.

Models are written in the project dialect (DuckDB's) and transpiled with sqlglot; partition
bounds are bound by psycopg. Staged rows live in UNLOGGED tables of `_tidegate_staging`, which no
reader of published tables looks at; a crash may leave them, and the next writer drops them.
One writing process per warehouse database: a writer holds a session-level advisory lock for its
whole life, like DuckDB's lock on its file. The workers of a distributed run hold it shared: they
write together (each batch fenced by its lease, each table's publishes one at a time), and no
single writer runs beside them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import psycopg

from tidegate.domain.errors import ContentionError, EngineError, UsageError
from tidegate.domain.model import Column
from tidegate.engines.base import Capabilities, Target
from tidegate.engines.postgres_connection import (
    Warehouse,
    connect,
    hold_writer_lock,
)
from tidegate.engines.postgres_publish import PostgresPublish
from tidegate.engines.sql_engine import Params
from tidegate.sql import cursor as cursor_sql
from tidegate.sql import postgres as pg
from tidegate.sql import statements as sql
from tidegate.sql.model_sql import SqlProblem
from tidegate.sql.postgres import POSTGRES


def _column(name: str, type_text: str, nullable: bool) -> Column:
    try:
        return Column(name, pg.canonical_type(type_text), nullable)
    except SqlProblem:
        raise EngineError(
            f"postgres: column {name} has type {type_text}, which tidegate cannot name; cast it"
        ) from None


class PostgresEngine(PostgresPublish):
    name = "postgres"
    # One writing process per warehouse database, held by the writer's advisory lock.
    capabilities = Capabilities(
        transactional_publish=True,
        single_writer_process=True,
        cursor_models=True,
        cursor_snapshots=True,
    )

    def __init__(
        self,
        warehouse: Warehouse,
        wait: bool = False,
        wait_timeout: float | None = None,
        on_wait: Callable[[str], None] | None = None,
        read_only: bool = False,
        lease_seconds: float | None = None,
    ) -> None:
        """A writer, or with `lease_seconds` a worker of distributed runs: it shares the
        warehouse with other workers, and its transactions end when idle for a lease."""
        self.warehouse = warehouse
        self._read_only = read_only
        self._lease_seconds = lease_seconds
        self._con = connect(warehouse, read_only, lease_seconds)
        if not read_only:
            try:
                hold_writer_lock(
                    self._con, warehouse, wait, wait_timeout, on_wait, lease_seconds is not None
                )
            except BaseException:
                self._con.close()
                raise
        self._interrupted = False
        self._new_caches()

    # running statements --------------------------------------------------------------------

    def _run(self, statement: str, params: Params | None = None) -> psycopg.Cursor[Any]:
        """Run one statement (always with parameters: psycopg then reads `%%` as `%`)."""
        try:
            return self._con.execute(statement, {} if params is None else params)
        except psycopg.errors.QueryCanceled as error:
            if self._interrupted:
                raise KeyboardInterrupt from None
            # the statement timeout (Ctrl-C is the other canceller)
            raise ContentionError(f"postgres: {_first_line(error)}") from error
        except (
            psycopg.errors.LockNotAvailable,
            psycopg.errors.DeadlockDetected,
            psycopg.errors.SerializationFailure,
        ) as error:
            # lost to a concurrent transaction: rolled back, worth another try
            raise ContentionError(f"postgres: {_first_line(error)}") from error
        except psycopg.Error as error:
            raise EngineError(f"postgres: {_first_line(error)}") from error

    def _one(self, statement: str, params: Params | None = None) -> tuple[Any, ...]:
        row = self._run(statement, params).fetchone()
        if row is None:
            raise EngineError("postgres: a statement that returns one row returned none")
        return tuple(row)

    # the hooks of SqlEngine ------------------------------------------------------------------

    flavor = POSTGRES
    _staged = staticmethod(pg.staged)
    _staging_table = staticmethod(pg.staging_name)
    _create_staging = staticmethod(pg.create_staging)
    _insert_markers = staticmethod(pg.insert_markers)

    def _bind(self, params: Mapping[str, Any], statement: str) -> Params:
        return dict(params)

    # the seam ----------------------------------------------------------------------------------

    def version(self) -> str:
        return str(self._one(pg.server_version())[0]).split()[0]

    def frozen_while_open(self, table: str) -> bool:
        # other sessions write PostgreSQL's tables while tidegate reads them
        return False

    def prepare(self) -> None:
        with self._transaction():
            self._run(pg.hold_prepare())  # workers starting together create the tables once
            for schema in (sql.META_SCHEMA, pg.STAGING_SCHEMA):
                self._ensure_schema(schema)
            self._run(sql.markers_ddl(POSTGRES))
            self._run(sql.fences_ddl(POSTGRES))
        if self._lease_seconds is None:
            # staging tables left by a crashed writer: this writer holds the lock, nobody uses
            # them (workers sharing the warehouse leave each other's alone)
            self.drop_staging()

    def _ensure_schema(self, schema: str) -> None:
        # created only when missing: CREATE SCHEMA needs a privilege on the database that using
        # an existing schema does not
        if not self._run(pg.schema_exists(), [schema]).fetchall():
            self._run(sql.create_schema(schema, POSTGRES))

    def table_columns(self, name: str, schema: str | None = None) -> list[Column] | None:
        statement = self._statement(("published columns",), pg.table_columns)
        rows = self._run(statement, [schema or self.warehouse.schema, name]).fetchall()
        if not rows:
            return None
        return [_column(r[0], r[1], bool(r[2])) for r in rows]

    def cursor_unique(self, table: str, column: str) -> bool:
        values = {"table": cursor_sql.quoted_name(table, POSTGRES), "column": column}
        return bool(self._one(cursor_sql.unique_column(POSTGRES), values)[0])

    def query_columns(self, sql_text: str, bounds: Mapping[str, Any]) -> list[Column]:
        cursor = self._run(pg.probe_query(sql_text), dict(bounds))
        return [_column(c.name, c.type_display, True) for c in cursor.description or ()]

    def stage_arrow(self, staging: str, data: Any) -> None:
        import pyarrow as pa

        from tidegate.engines.arrow_types import column_type

        reader = data.to_reader() if isinstance(data, pa.Table) else data
        columns = [Column(f.name, column_type(f.type), True) for f in reader.schema]
        target = pg.staged(staging)
        try:
            # one transaction: a failure midway leaves no staging table
            with self._con.transaction():
                self._run(pg.create_staging_table(target, columns))
                copy_in = pg.copy_in(target, [c.name for c in columns])
                with self._con.cursor().copy(copy_in) as copy:
                    for batch in reader:
                        for row in zip(*(c.to_pylist() for c in batch.columns), strict=True):
                            copy.write_row(row)
        except psycopg.Error as error:
            raise EngineError(f"postgres: {_first_line(error)}") from error

    def _fetch_arrow(self, statement: str, params: Params) -> Any:
        import pyarrow as pa

        from tidegate.engines.arrow_types import arrow_type

        cursor = self._run(statement, params)
        rows = cursor.fetchall()
        names = [c.name for c in cursor.description or ()]
        types = [arrow_type(pg.canonical_type(c.type_display)) for c in cursor.description or ()]
        return pa.table(
            {
                name: pa.array([row[i] for row in rows], type=types[i])
                for i, name in enumerate(names)
            }
        )

    def staging_columns(self, staging: str, count_nulls: bool = True) -> list[Column]:
        described = self.table_columns(pg.staging_name(staging), pg.STAGING_SCHEMA) or []
        names = [c.name for c in described]
        if not names:
            return []
        if not count_nulls:
            return [Column(c.name, c.type, False) for c in described]
        source = pg.staged(staging)
        nulls = self._one(
            self._statement(
                ("nulls", staging, tuple(names)), lambda: sql.null_counts(source, names, POSTGRES)
            )
        )
        return [Column(c.name, c.type, bool(n)) for c, n in zip(described, nulls, strict=True)]

    def _all_columns(self, table: str, staged: bool = False) -> list[str]:
        # a source's table may name its schema (`raw.orders`)
        schema, name = sql.schema_and_name(table)
        found = (
            self.table_columns(pg.staging_name(table), pg.STAGING_SCHEMA)
            if staged
            else self.table_columns(name, schema)
        )
        if found is None:
            raise EngineError(f'postgres: relation "{table}" does not exist')
        return [c.name for c in found]

    def handle(self) -> PostgresEngine:
        """Another session on the same warehouse for a worker thread (its own connection; the
        writer lock stays with this one)."""
        twin = PostgresEngine.__new__(PostgresEngine)
        twin.warehouse = self.warehouse
        twin._read_only = self._read_only
        twin._lease_seconds = self._lease_seconds
        twin._con = connect(self.warehouse, self._read_only, self._lease_seconds)
        twin._interrupted = False
        twin._new_caches()
        return twin

    def _hold_target(self, target: Target) -> None:
        if self._lease_seconds is not None:
            self._published_columns.clear()  # another worker may have evolved the table
            self._run(pg.hold_table(), [f"{target.schema or self.warehouse.schema}.{target.name}"])

    def staging_tables(self) -> list[str]:
        rows = self._run(pg.tables_in_schema(), [pg.STAGING_SCHEMA]).fetchall()
        return sorted(str(r[0]) for r in rows)

    def interrupt(self) -> None:
        self._interrupted = True
        with contextlib.suppress(psycopg.Error):
            self._con.cancel_safe()

    def close(self) -> None:
        # ending the session releases the writer lock
        self._con.close()

    # the reference example --------------------------------------------------------------------

    def load_reference_orders(self, rows_per_day: int, seed: int) -> int:
        """Create the reference `orders` source (docs/design.md §2) in the warehouse's schema: the
        very rows DuckDB generates (sql/example_data.py), copied in; returns its row count."""
        from tidegate.engines.postgres_load import reference_orders

        if self.table_columns("orders") is not None:
            raise UsageError(
                f"warehouse {self.warehouse.label} holds a table orders already; "
                "the example loads into a schema without one"
            )
        self._ensure_schema(self.warehouse.schema)
        columns, batches = reference_orders(rows_per_day, seed)
        target = sql.table("orders", self.warehouse.schema)
        names = [c.name for c in columns]
        try:
            with self._con.transaction():
                self._run(sql.create_table(target, columns, flavor=POSTGRES))
                with self._con.cursor().copy(pg.copy_in(target, names)) as copy:
                    for batch in batches:
                        for row in batch:
                            copy.write_row(row)
        except psycopg.Error as error:
            raise EngineError(f"postgres: {_first_line(error)}") from error
        return int(self._one(sql.count_rows(target, flavor=POSTGRES))[0])


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def load_example(
    dsn: str,
    schema: str = "public",
    rows_per_day: int = 1000,
    seed: int = 1,
    password_env: str | None = None,
) -> int:
    """Copy the reference orders of `tidegate init --example orders` (the same rows, for the
    same rows per day and seed) into a PostgreSQL warehouse as table `orders` of `schema`, as
    a writer of it; returns the rows loaded."""
    from tidegate.engines.postgres_connection import warehouse_of

    engine = PostgresEngine(warehouse_of(dsn, schema, password_env))
    try:
        return engine.load_reference_orders(rows_per_day, seed)
    finally:
        engine.close()
