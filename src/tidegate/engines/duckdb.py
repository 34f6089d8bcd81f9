"""DuckDB: the embedded default warehouse. One writing process per file (docs/design.md §7)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.expressions import DataType

from tidegate.domain.errors import BusyError, EngineError, UsageError
from tidegate.domain.model import Column, SourceFiles
from tidegate.engines.base import Capabilities
from tidegate.engines.duckdb_publish import DuckDBPublish
from tidegate.engines.sql_engine import Params
from tidegate.sql import cursor as cursor_sql
from tidegate.sql import statements as sql
from tidegate.sql.model_sql import SqlProblem, parse_type

WAIT_STEP_SECONDS = 0.2
# Parsed statements a handle keeps: the same few dozen run for every batch of a session.
PARSED_KEPT = 256
FILE_ACCESS_HINT = (
    "; a model reads files only through a file source: [sources.NAME] path = ... in tidegate.toml"
)


def duckdb_column(name: str, type_text: str, nullable: bool) -> Column:
    """A column as DuckDB describes it, its type in tidegate's spelling."""
    try:
        return Column(name, parse_type(type_text), nullable)
    except SqlProblem:
        raise EngineError(
            f"duckdb: column {name} has type {type_text}, which tidegate cannot name; cast it"
        ) from None


# Types whose values are equal exactly when their texts are (unlike a float's -0.0 and 0.0, or
# an interval's '1 day' and '24:00:00').
TEXTUAL_TYPES = frozenset(
    {
        DataType.Type.BOOLEAN,
        DataType.Type.TINYINT,
        DataType.Type.SMALLINT,
        DataType.Type.INT,
        DataType.Type.BIGINT,
        DataType.Type.INT128,
        DataType.Type.UTINYINT,
        DataType.Type.USMALLINT,
        DataType.Type.UINT,
        DataType.Type.UBIGINT,
        DataType.Type.UINT128,
        DataType.Type.DECIMAL,
        DataType.Type.VARCHAR,
        DataType.Type.TEXT,
        DataType.Type.DATE,
        DataType.Type.TIMESTAMP,
        DataType.Type.TIMESTAMPNTZ,
        DataType.Type.TIMESTAMP_S,
        DataType.Type.TIMESTAMP_MS,
        DataType.Type.TIMESTAMP_NS,
        DataType.Type.TIME,
        DataType.Type.UUID,
    }
)


def textual_columns(definition: str) -> frozenset[str]:
    """The columns of a table, from its CREATE statement, whose values are equal exactly when
    their texts are: of a TEXTUAL_TYPES type and with no collation (a NOCASE column holds 'a'
    and 'A' as one value). None of them where sqlglot cannot read the statement: DuckDB then
    counts every key itself."""
    try:
        schema = sqlglot.parse_one(definition, dialect=sql.DIALECT).this
    except SqlglotError:
        return frozenset()
    columns = schema.expressions if isinstance(schema, exp.Schema) else []
    return frozenset(
        defined.name
        for defined in columns
        if isinstance(defined, exp.ColumnDef)
        and isinstance(kind := defined.args.get("kind"), DataType)
        and kind.this in TEXTUAL_TYPES
        and not any(
            isinstance(constraint.args.get("kind"), exp.CollateColumnConstraint)
            for constraint in defined.args.get("constraints") or ()
        )
    )


def _is_lock_conflict(error: Exception) -> bool:
    return "lock" in str(error).lower()


class DuckDBEngine(DuckDBPublish):
    name = "duckdb"
    capabilities = Capabilities(
        transactional_publish=True, single_writer_process=True, cursor_models=True
    )

    def __init__(
        self,
        path: Path,
        wait: bool = False,
        wait_timeout: float | None = None,
        on_wait: Callable[[str], None] | None = None,
        read_only: bool = False,
        files: Mapping[str, SourceFiles] | None = None,
    ) -> None:
        self.path = path
        self._con = self._connect(path, wait, wait_timeout, on_wait, read_only)
        self._close_file_access(files or {})
        self._con.execute("SET TimeZone = 'UTC'")
        # DuckDB's own count of the cores it may use (its default thread count)
        self._cores = int(self._con.execute("SELECT current_setting('threads')").fetchone()[0])
        self._new_caches()
        # The staging catalog is this connection's memory, shared by its handles and no one
        # else: no other session can leave a table there. Each staging table present, with the
        # SELECT that filled it (None: Arrow rows), so that dropping an absent one costs nothing
        # and a SELECT's result types, the same for every batch, are described once.
        self._staged_by: dict[str, str | None] = {}
        self._described: dict[tuple[str, str], list[Any]] = {}
        self._textual: dict[tuple[str, str], frozenset[str]] = {}

    @staticmethod
    def _connect(
        path: Path,
        wait: bool,
        wait_timeout: float | None,
        on_wait: Callable[[str], None] | None,
        read_only: bool,
    ) -> Any:
        deadline = None if wait_timeout is None else time.monotonic() + wait_timeout
        announced = False
        while True:
            try:
                if read_only and not path.exists():
                    raise UsageError(f"warehouse {path} does not exist")
                return duckdb.connect(str(path), read_only=read_only)
            except duckdb.IOException as error:
                if not _is_lock_conflict(error):
                    raise UsageError(f"cannot open warehouse {path}: {error}") from None
                if not wait or (deadline is not None and time.monotonic() > deadline):
                    raise BusyError(
                        f"warehouse {path} is in use by another tidegate process; "
                        "retry later or pass --wait"
                    ) from None
                if on_wait is not None and not announced:
                    on_wait(f"waiting for warehouse {path}: another tidegate process holds it")
                    announced = True
                time.sleep(WAIT_STEP_SECONDS)
            except duckdb.Error as error:
                raise UsageError(f"cannot open warehouse {path}: {error}") from None

    def _close_file_access(self, files: Mapping[str, SourceFiles]) -> None:
        """The warehouse's connection reaches no file but its own and the file sources' folders:
        whatever SQL runs on it (a model's, a check's) cannot read or write other files, attach
        another database or load an extension from disk. sql/sandbox.py refuses such calls at
        build; this holds should one slip by. The settings are the database's: a second
        connection of this process to it finds them made."""
        (external,) = self._con.execute(
            "SELECT current_setting('enable_external_access')"
        ).fetchone()
        if external:
            folders = sorted(
                {source.folder for source in files.values()} | set(self._readable_folders())
            )
            if folders:
                self._con.execute("SET allowed_directories = ?", [folders])
            self._con.execute("SET enable_external_access = false")

    def _readable_folders(self) -> list[str]:
        """Folders besides the file sources' that the warehouse's SQL reads (none here)."""
        return []

    def keep_file_sources(self, files: Mapping[str, SourceFiles], temporary: bool = False) -> None:
        """Each file source's view, made or remade when it does not read what is declared; a
        table of that name is not replaced. A read-only handle (`temporary`) makes a view of its
        own for its life instead, where the warehouse's is missing or reads other files: a
        deploy's preflight reads the files before any writer has made their view."""
        for name, source in sorted(files.items()):
            label = sql.file_label(source.path, source.format)
            found = self._run(sql.tables_named(), ["main", name]).fetchall()
            if any(tuple(row) != (True, "VIEW") for row in found):
                raise UsageError(
                    f"source {name}: the warehouse holds a table {name!r}; a file source is a "
                    "view tidegate keeps: rename the table or the source"
                )
            if found and self._one(sql.view_comment(), [name]) == (label,):
                continue
            try:
                with self._transaction():
                    for statement in sql.file_view(name, source.path, source.format, temporary):
                        self._run(statement)
            except EngineError as error:
                raise UsageError(
                    f"source {name}: cannot read {source.path}: {error}".replace(
                        FILE_ACCESS_HINT, ""
                    )
                ) from None

    def _new_caches(self) -> None:
        super()._new_caches()
        self._parsed: dict[str, Any] = {}
        # set by interrupt(): no statement runs on this handle after it (a publish cut between
        # two of its statements rolls back instead of going on to its commit)
        self._interrupted = False

    def _parse(self, statement: str) -> Any:
        """The statement parsed once per handle: DuckDB 2's parser takes about a millisecond
        for the staged rows' profile, which every batch would pay again for the same text."""
        parsed = self._parsed.get(statement)
        if parsed is None:
            found = self._con.extract_statements(statement)
            if len(found) != 1:
                return statement  # a script of several statements runs as text
            if len(self._parsed) >= PARSED_KEPT:
                del self._parsed[next(iter(self._parsed))]
            parsed = self._parsed[statement] = found[0]
        return parsed

    def _run(self, statement: str, params: Params | None = None) -> Any:
        if self._interrupted:
            raise KeyboardInterrupt
        try:
            return self._con.execute(self._parse(statement), params)
        except duckdb.InterruptException:
            raise KeyboardInterrupt from None
        except duckdb.Error as error:
            message = str(error).splitlines()[0]
            if isinstance(error, duckdb.PermissionException):
                message += FILE_ACCESS_HINT
            raise EngineError(f"duckdb: {message}") from error
        except RuntimeError as error:
            # DuckDB answers Ctrl-C during a query with RuntimeError("Query interrupted") and
            # swallows Python's KeyboardInterrupt: give it back, so the CLI exits 130.
            if str(error) == "Query interrupted":
                raise KeyboardInterrupt from None
            raise

    @staticmethod
    def _only(params: Mapping[str, Any], statement: str) -> dict[str, Any]:
        # DuckDB rejects named values that the statement does not use.
        return {k: v for k, v in params.items() if f"${k}" in statement}

    def version(self) -> str:
        return str(duckdb.__version__)

    def prepare(self) -> None:
        self._run(sql.create_schema(sql.META_SCHEMA))
        self._run(sql.attach_staging())
        self._run(sql.markers_ddl())

    def table_columns(self, name: str, schema: str | None = None) -> list[Column] | None:
        statement = self._statement(("published columns",), sql.published_columns)
        rows = self._run(statement, [schema or "main", name]).fetchall()
        if not rows:
            return None
        return [duckdb_column(r[0], r[1], r[2] == "YES") for r in rows]

    def frozen_while_open(self, table: str) -> bool:
        # The warehouse file is opened for writing: DuckDB locks it against every other process.
        # Only a table of that file, and no temporary table of the same name that a read of
        # the name would find first.
        found = self._run(sql.tables_named(), ["main", table]).fetchall()
        return [tuple(row) for row in found] == [(True, "BASE TABLE")]

    def cursor_unique(self, table: str, column: str) -> bool:
        return bool(self._one(cursor_sql.unique_column(), [table, column])[0])

    def query_columns(self, sql_text: str, bounds: Mapping[str, Any]) -> list[Column]:
        statement = sql.describe_query(sql_text)
        rows = self._run(statement, self._only(bounds, statement)).fetchall()
        return [duckdb_column(r[0], r[1], True) for r in rows]

    def stage(self, staging: str, sql_text: str, bounds: Mapping[str, Any]) -> None:
        super().stage(staging, sql_text, bounds)
        self._staged_by[staging] = sql_text

    def stage_arrow(self, staging: str, data: Any) -> None:
        # the rows reach DuckDB as a registered Arrow scan: a reader is consumed batch by batch
        view = f"{staging}__arrow"
        self._con.register(view, data)
        try:
            self.stage(staging, sql.select_all(sql.table(view)), {})
        finally:
            self._con.unregister(view)
        self._staged_by[staging] = None  # each batch's rows bring their own types

    def drop_staging(self, staging: str | None = None) -> int:
        if staging is not None and staging not in self._staged_by:
            return 0
        dropped = super().drop_staging(staging)
        if staging is None:
            self._staged_by.clear()
        else:
            del self._staged_by[staging]
        return dropped

    def _fetch_arrow(self, statement: str, params: Params) -> Any:
        # a relation hands its rows over as Arrow without the copy a DB-API result makes
        try:
            return self._con.sql(statement, params=params).to_arrow_table()
        except duckdb.Error as error:
            raise EngineError(f"duckdb: {str(error).splitlines()[0]}") from error

    def staging_columns(self, staging: str, count_nulls: bool = True) -> list[Column]:
        source = sql.staged(staging)
        query = self._staged_by.get(staging)
        described = None if query is None else self._described.get((staging, query))
        if described is None:
            described = self._run(
                self._statement(("describe", staging), lambda: sql.describe(source))
            ).fetchall()
            if query is not None:
                self._described[(staging, query)] = described
        names = [row[0] for row in described]
        if not count_nulls:
            return [duckdb_column(row[0], row[1], False) for row in described]
        nulls = (
            self._run(
                self._statement(
                    ("nulls", staging, tuple(names)), lambda: sql.null_counts(source, names)
                )
            ).fetchone()
            if names
            else ()
        )
        return [
            duckdb_column(row[0], row[1], bool(count))
            for row, count in zip(described, nulls or (), strict=False)
        ]

    # the hooks of SqlEngine ------------------------------------------------------------------

    flavor = sql.DUCKDB
    _staged = staticmethod(sql.staged)
    _create_staging = staticmethod(sql.create_table_as)
    _insert_markers = staticmethod(sql.insert_markers)

    def _one(self, statement: str, params: Params | None = None) -> Any:
        return self._run(statement, params).fetchone()

    def _textual_columns(self, staging: str) -> frozenset[str]:
        query = self._staged_by.get(staging)
        if query is None:
            return frozenset()  # Arrow rows bring their own types each batch
        known = self._textual.get((staging, query))
        if known is None:
            found = self._one(sql.table_definition(), [sql.STAGING_CATALOG, staging])
            known = self._textual[(staging, query)] = (
                frozenset() if found is None else textual_columns(found[0])
            )
        return known

    def _rows_created(self, result: Any) -> int | None:
        # DuckDB answers CREATE TABLE AS with the number of rows it wrote
        return int(result.fetchone()[0])

    def _bind(self, params: Mapping[str, Any], statement: str) -> Params:
        return self._only(params, statement)

    def _all_columns(self, table: str, staged: bool = False) -> list[str]:
        source = sql.staged(table) if staged else sql.table(table)
        return [row[0] for row in self._run(sql.describe(source)).fetchall()]

    def handle(self) -> DuckDBEngine:
        """Another handle on the same database for a worker thread (a DuckDB cursor)."""
        twin = type(self).__new__(type(self))
        twin.path = self.path
        twin._con = self._con.cursor()
        twin._cores = self._cores
        twin._con.execute("SET TimeZone = 'UTC'")
        twin._new_caches()
        twin._staged_by = self._staged_by
        twin._staged_rows = self._staged_rows
        twin._described = self._described
        twin._textual = self._textual
        return twin

    def staging_tables(self) -> list[str]:
        rows = self._run(sql.tables_in_catalog(), [sql.STAGING_CATALOG]).fetchall()
        return sorted(r[0] for r in rows)

    def share_cores(self, batches_in_flight: int) -> None:
        # Each batch's statements run on its worker's thread, and DuckDB adds threads of its
        # own to every statement: with as many batches in flight as cores, those only contend
        # (measured: 365 daily batches, two in flight on two cores, 10-15% faster with one
        # thread each; a batch of 30 days as fast). The setting is the database's, shared by
        # every handle.
        self._run("SET threads = ?", [max(1, self._cores // max(1, batches_in_flight))])

    def interrupt(self) -> None:
        self._interrupted = True
        self._con.interrupt()

    def close(self) -> None:
        self._con.close()

    def break_reference_order(self, day: datetime) -> None:
        """Give one order of `day` an unknown status (the demo's failed load)."""
        from tidegate.sql.example_data import BREAK_ONE_ORDER

        self._run(BREAK_ONE_ORDER, {"day": day})

    def repair_reference_orders(self) -> None:
        from tidegate.sql.example_data import REPAIR_ORDERS

        self._run(REPAIR_ORDERS)

    def load_reference_orders(self, rows_per_day: int, seed: int) -> int:
        """Create the reference `orders` source (docs/design.md §2); returns its row count."""
        from tidegate.sql.example_data import CREATE_ORDERS, DAYS

        self._run(CREATE_ORDERS, {"rows_per_day": rows_per_day, "seed": seed, "days": DAYS})
        return int(self._run(sql.count_rows(sql.table("orders"))).fetchone()[0])
