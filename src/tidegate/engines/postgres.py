"""PostgreSQL: a warehouse on a server (SPEC §7). Models run and publish inside it.

Models are written in the project dialect (DuckDB's) and transpiled with sqlglot; partition
bounds are bound by psycopg. Staged rows live in UNLOGGED tables of `_tidegate_staging`, which no
reader of published tables looks at; a crash may leave them, and the next writer drops them.
One writing process per warehouse database: a writer holds a session-level advisory lock for its
whole life, like DuckDB's lock on its file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg

from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError, UsageError
from tidegate.domain.model import CheckSpec, Column
from tidegate.engines.base import (
    Capabilities,
    CommitMarker,
    KeyDifference,
    PartitionProfile,
    PartitionSummary,
    Relation,
    window_bounds,
)
from tidegate.engines.postgres_connection import (
    Warehouse,
    connect,
    hold_writer_lock,
)
from tidegate.engines.postgres_publish import PostgresPublish
from tidegate.sql import diff as diff_sql
from tidegate.sql import postgres as pg
from tidegate.sql import statements as sql
from tidegate.sql.model_sql import SqlProblem
from tidegate.sql.postgres import POSTGRES

Params = Mapping[str, Any] | Sequence[Any]


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
    capabilities = Capabilities(transactional_publish=True, single_writer_process=True)

    def __init__(
        self,
        warehouse: Warehouse,
        wait: bool = False,
        wait_timeout: float | None = None,
        on_wait: Callable[[str], None] | None = None,
        read_only: bool = False,
    ) -> None:
        self.warehouse = warehouse
        self._read_only = read_only
        self._con = connect(warehouse, read_only)
        if not read_only:
            try:
                hold_writer_lock(self._con, warehouse, wait, wait_timeout, on_wait)
            except BaseException:
                self._con.close()
                raise
        self._interrupted = False
        # Statements that are the same for every partition of a session, built once.
        self._statements: dict[tuple[object, ...], str] = {}
        self._published_columns: dict[tuple[str | None, str], list[Column]] = {}

    # running statements --------------------------------------------------------------------

    def _run(self, statement: str, params: Params | None = None) -> psycopg.Cursor[Any]:
        """Run one statement (always with parameters: psycopg then reads `%%` as `%`)."""
        try:
            return self._con.execute(statement, {} if params is None else params)
        except psycopg.errors.QueryCanceled as error:
            if self._interrupted:
                raise KeyboardInterrupt from None
            raise EngineError(f"postgres: {_first_line(error)}") from error
        except psycopg.Error as error:
            raise EngineError(f"postgres: {_first_line(error)}") from error

    def _one(self, statement: str, params: Params | None = None) -> tuple[Any, ...]:
        row = self._run(statement, params).fetchone()
        if row is None:
            raise EngineError("postgres: a statement that returns one row returned none")
        return tuple(row)

    def _statement(self, key: tuple[object, ...], build: Callable[[], str]) -> str:
        """SQL built once per session: the same model, staging slot and checks give the same
        statement for every batch; only the bound values change."""
        statement = self._statements.get(key)
        if statement is None:
            statement = self._statements[key] = build()
        return statement

    # the seam ----------------------------------------------------------------------------------

    def version(self) -> str:
        return str(self._one(pg.server_version())[0]).split()[0]

    def prepare(self) -> None:
        for schema in (sql.META_SCHEMA, pg.STAGING_SCHEMA):
            self._ensure_schema(schema)
        self._run(sql.markers_ddl(POSTGRES))
        # staging tables left by a crashed writer: this writer holds the lock, nobody uses them
        self.drop_staging()

    def _ensure_schema(self, schema: str) -> None:
        # created only when missing: CREATE SCHEMA needs a privilege on the database that using
        # an existing schema does not
        if not self._run(pg.schema_exists(), [schema]).fetchall():
            self._run(sql.create_schema(schema, POSTGRES))

    def table_columns(self, name: str, schema: str | None = None) -> list[Column] | None:
        rows = self._run(pg.table_columns(), [schema or self.warehouse.schema, name]).fetchall()
        if not rows:
            return None
        return [_column(r[0], r[1], bool(r[2])) for r in rows]

    def query_columns(self, sql_text: str, bounds: Mapping[str, Any]) -> list[Column]:
        cursor = self._run(pg.probe_query(sql_text), dict(bounds))
        return [_column(c.name, c.type_display, True) for c in cursor.description or ()]

    def stage(self, staging: str, sql_text: str, bounds: Mapping[str, Any]) -> None:
        statement = self._statement(
            ("stage", staging, sql_text),
            lambda: pg.create_staging(pg.staged(staging), sql_text),
        )
        try:
            self._run(statement, dict(bounds))
        except EngineError:
            self.drop_staging(staging)
            raise

    def staging_columns(self, staging: str) -> list[Column]:
        described = self.table_columns(pg.staging_name(staging), pg.STAGING_SCHEMA) or []
        names = [c.name for c in described]
        if not names:
            return []
        source = pg.staged(staging)
        nulls = self._one(
            self._statement(
                ("nulls", staging, tuple(names)), lambda: sql.null_counts(source, names, POSTGRES)
            )
        )
        return [Column(c.name, c.type, bool(n)) for c, n in zip(described, nulls, strict=True)]

    def measure(self, check: CheckSpec, staging: str, bounds: Mapping[str, Any]) -> int | None:
        statement = sql.check_measure(check, pg.staged(staging), POSTGRES)
        value = self._one(statement, dict(bounds))[0]
        return None if value is None else int(value)

    def measure_query(
        self,
        check: CheckSpec,
        staging: str,
        tables: Mapping[str, str],
        partition_column: str,
        grain: str | None,
    ) -> dict[int | None, int]:
        statement = self._statement(
            (
                "query",
                _check_key(check),
                staging,
                tuple(sorted(tables.items())),
                partition_column,
                grain,
            ),
            lambda: sql.query_violations(
                check.params["sql"],
                pg.staged(staging),
                {name: sql.table(physical) for name, physical in tables.items()},
                partition_column,
                grain,
                POSTGRES,
            ),
        )
        rows = self._run(statement).fetchall()
        if grain is None:
            return {None: int(rows[0][0])}
        return {None if r[0] is None else int(r[0]): int(r[1]) for r in rows}

    def checksum(self, staging: str, columns: Sequence[str]) -> Checksum:
        rows, digest = self._one(sql.checksum(pg.staged(staging), columns, None, POSTGRES))
        return Checksum(int(rows), int(digest))

    def source_fingerprint(
        self, table: str, time_column: str, bounds: Mapping[str, Any]
    ) -> Checksum:
        # a key-list partition has no time window: it reads the whole source
        windowed = "start" in bounds
        source = sql.table(table)

        def build() -> str:
            where = sql.partition_predicate(time_column, False) if windowed else None
            return sql.checksum(source, self._all_columns(table), where, POSTGRES)

        statement = self._statement(("fingerprint", table, time_column, windowed), build)
        rows, digest = self._one(statement, dict(bounds))
        return Checksum(int(rows), int(digest))

    def profile(
        self,
        table: str,
        staged: bool,
        partition_column: str,
        grain: str,
        bounds: Mapping[str, Any] | None,
        columns: Sequence[str] | None = None,
        checks: Sequence[CheckSpec] = (),
        aggregates: Sequence[str] = (),
    ) -> dict[int | None, PartitionProfile]:
        source = pg.staged(table) if staged else sql.table(table)
        # a staging table holds only its batch; a source is read in the $start/$end window
        windowed = bounds is not None and not staged
        key = (
            "profile",
            table,
            staged,
            partition_column,
            grain,
            windowed,
            None if columns is None else tuple(columns),
            tuple(_check_key(c) for c in checks),
            tuple(aggregates),
        )

        def build() -> str:
            names = list(columns) if columns is not None else self._all_columns(table, staged)
            return sql.grouped_checksums(
                source,
                names,
                partition_column,
                grain,
                windowed,
                columns is None,
                checks,
                aggregates,
                POSTGRES,
            )

        statement = self._statement(key, build)
        rows = self._run(statement, dict(bounds or {})).fetchall()
        width = len(checks)
        return {
            None if r[0] is None else int(r[0]): PartitionProfile(
                Checksum(int(r[1]), int(r[2])),
                tuple(None if v is None else int(v) for v in r[3 : 3 + width]),
                tuple(None if v is None else str(v) for v in r[3 + width :]),
            )
            for r in rows
        }

    def _all_columns(self, table: str, staged: bool = False) -> list[str]:
        where = (pg.staging_name(table), pg.STAGING_SCHEMA) if staged else (table, None)
        found = self.table_columns(*where)
        if found is None:
            raise EngineError(f'postgres: relation "{table}" does not exist')
        return [c.name for c in found]

    def count_in_window(self, table: str, time_column: str, bounds: Mapping[str, Any]) -> int:
        statement = self._statement(
            ("count", table, time_column),
            lambda: sql.count_rows(
                sql.table(table), sql.partition_predicate(time_column, False), POSTGRES
            ),
        )
        return int(self._one(statement, dict(bounds))[0])

    def aggregates_by_partition(
        self,
        table: str,
        staged: bool,
        time_column: str,
        grain: str,
        expressions: Sequence[str],
        bounds: Mapping[str, Any],
    ) -> dict[int, list[str | None]]:
        source = pg.staged(table) if staged else sql.table(table)
        statement = sql.grouped_aggregates(source, time_column, grain, expressions, POSTGRES)
        rows = self._run(statement, dict(bounds)).fetchall()
        return {int(row[0]): [None if v is None else str(v) for v in row[1:]] for row in rows}

    @staticmethod
    def _rows(relation: Relation) -> diff_sql.Rows:
        return diff_sql.Rows(
            sql.table(relation.name, relation.schema), relation.partition_column, relation.grain
        )

    @staticmethod
    def _window_values(relation: Relation, window: tuple[int, int] | None) -> dict[str, Any]:
        values: dict[str, Any] = {"keys": list(relation.keys)} if relation.grain == "key" else {}
        if window is not None:
            start, end = window
            if relation.grain == "key":
                values.update(lo=start, hi=end)
            else:
                values.update(window_bounds(start, end))
        return values

    def partition_summaries(
        self,
        relation: Relation,
        columns: Sequence[str],
        numeric: Sequence[str],
        window: tuple[int, int] | None,
    ) -> dict[int, PartitionSummary]:
        statement = self._statement(
            ("summaries", relation, tuple(columns), tuple(numeric), window is not None),
            lambda: diff_sql.partition_summaries(
                self._rows(relation), columns, numeric, window is not None, POSTGRES
            ),
        )
        found: dict[int, PartitionSummary] = {}
        for row in self._run(statement, self._window_values(relation, window)).fetchall():
            if row[0] is None:  # a row outside every partition (an undeclared key)
                continue
            sums = row[2 : 2 + len(numeric)]
            nulls = row[2 + len(numeric) :]
            found[int(row[0])] = PartitionSummary(
                int(row[1]),
                {n: None if v is None else str(v) for n, v in zip(numeric, sums, strict=True)},
                {n: int(v) for n, v in zip(columns, nulls, strict=True)},
            )
        return found

    def key_differences(
        self,
        left: Relation,
        right: Relation,
        key: Sequence[tuple[str, str]],
        compared: Sequence[tuple[str, str]],
        window: tuple[int, int],
        tolerance: float = 0.0,
        sample: int = 5,
    ) -> dict[int, dict[str, KeyDifference]]:
        statement = self._statement(
            ("key differences", left, right, tuple(key), tuple(compared), sample),
            lambda: diff_sql.key_differences(
                self._rows(left), self._rows(right), key, compared, sample, POSTGRES
            ),
        )
        values = {**self._window_values(left, window), "tolerance": tolerance}
        names = [name for name, _ in compared]
        found: dict[int, dict[str, KeyDifference]] = {}
        for row in self._run(statement, values).fetchall():
            if row[0] is None:
                continue
            bucket, kind, count, first = int(row[0]), str(row[1]), int(row[2]), row[3] or []
            per_column = (
                {n: int(v) for n, v in zip(names, row[4:], strict=True) if v}
                if kind == "changed"
                else {}
            )
            found.setdefault(bucket, {})[kind] = KeyDifference(
                count, tuple(tuple(k) for k in first), per_column
            )
        return found

    def handle(self) -> PostgresEngine:
        """Another session on the same warehouse for a worker thread (its own connection; the
        writer lock stays with this one)."""
        twin = PostgresEngine.__new__(PostgresEngine)
        twin.warehouse = self.warehouse
        twin._read_only = self._read_only
        twin._con = connect(self.warehouse, self._read_only)
        twin._interrupted = False
        twin._statements = {}
        twin._published_columns = {}
        return twin

    def markers(self, attempt_ids: Sequence[str]) -> dict[str, CommitMarker]:
        found: dict[str, CommitMarker] = {}
        ids = list(attempt_ids)
        for offset in range(0, len(ids), 500):
            chunk = ids[offset : offset + 500]
            for row in self._run(sql.select_markers(len(chunk), POSTGRES), chunk).fetchall():
                marker = CommitMarker(*row)
                found[marker.attempt_id] = marker
        return found

    def staging_tables(self) -> list[str]:
        rows = self._run(pg.tables_in_schema(), [pg.STAGING_SCHEMA]).fetchall()
        return sorted(str(r[0]) for r in rows)

    def drop_staging(self, staging: str | None = None) -> int:
        names = [pg.staging_name(staging)] if staging is not None else self.staging_tables()
        for name in names:
            self._run(self._drop_statement(name))
        return len(names)

    def _drop_statement(self, staging: str) -> str:
        return self._statement(
            ("drop", staging), lambda: sql.drop_table(pg.staged(staging), POSTGRES)
        )

    def interrupt(self) -> None:
        self._interrupted = True
        with contextlib.suppress(psycopg.Error):
            self._con.cancel_safe()

    def close(self) -> None:
        # ending the session releases the writer lock
        self._con.close()

    # the reference example --------------------------------------------------------------------

    def load_reference_orders(self, rows_per_day: int, seed: int) -> int:
        """Create the reference `orders` source (SPEC §2) in the warehouse's schema: the very
        rows DuckDB generates (sql/example_data.py), copied in; returns its row count."""
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


def _check_key(check: CheckSpec) -> tuple[object, ...]:
    return (check.name, check.kind, check.severity.value, repr(sorted(check.params.items())))


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
