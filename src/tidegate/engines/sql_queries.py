"""What the SQL warehouses (DuckDB, PostgreSQL, Spark) do alike when they read: stage, measure,
profile and compare by building statements in `sql/` with the engine's flavor, running them and
reading the rows back. Each engine gives the hooks: its flavor, where a staged table lives, how a
statement runs and binds its values, and how a table's columns are read. Publishing is
sql_engine.py's (a transaction of the warehouse) or the engine's own (Spark's pointer swap)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from sqlglot import exp

from tidegate.domain.checks import repeated_keys
from tidegate.domain.checksum import Checksum, digest_of
from tidegate.domain.errors import EngineError
from tidegate.domain.model import CheckSpec, Column
from tidegate.engines.base import (
    Capabilities,
    KeyDifference,
    PartitionProfile,
    PartitionSummary,
    Relation,
    window_bounds,
)
from tidegate.sql import cursor as cursor_sql
from tidegate.sql import diff as diff_sql
from tidegate.sql import statements as sql
from tidegate.sql.statements import Flavor

Params = Mapping[str, Any] | Sequence[Any]

# Up to this many staged rows, a profile lists their values and digests them in Python.
LISTED_ROWS = 256


class SqlQueries(ABC):
    """The reading half of an engine that speaks SQL; the engine subclass gives the hooks."""

    flavor: ClassVar[Flavor]
    capabilities: Capabilities
    _statements: dict[tuple[object, ...], str]
    _published_columns: dict[tuple[str | None, str], list[Column]]
    _staged_rows: dict[str, int]

    # hooks ---------------------------------------------------------------------------------

    @staticmethod
    @abstractmethod
    def _staged(name: str) -> exp.Table:
        """The staging table that holds the staging slot `name`."""
        ...

    @staticmethod
    def _staging_table(name: str) -> str:
        """The name a staging slot's table is kept under (as staging_tables lists it)."""
        return name

    @staticmethod
    @abstractmethod
    def _create_staging(target: exp.Table, query_sql: str) -> str: ...

    def _textual_columns(self, staging: str) -> frozenset[str]:
        """The columns of a staging table whose values are equal exactly when their texts
        are (not a float's -0.0 and 0.0, not an interval's '1 day' and '24:00:00')."""
        return frozenset()

    def _rows_created(self, result: Any) -> int | None:
        """The rows a CREATE TABLE AS wrote, where its driver's result tells (None: not
        told)."""
        return None

    @abstractmethod
    def _run(self, statement: str, params: Params | None = None) -> Any: ...

    @abstractmethod
    def _one(self, statement: str, params: Params | None = None) -> Any:
        """The one row a statement returns."""
        ...

    @abstractmethod
    def _bind(self, params: Mapping[str, Any], statement: str) -> Params:
        """The values a statement is run with."""
        ...

    @abstractmethod
    def _all_columns(self, table: str, staged: bool = False) -> list[str]: ...

    @abstractmethod
    def _fetch_arrow(self, statement: str, params: Params) -> Any:
        """What a statement returns, as a pyarrow.Table."""

    @abstractmethod
    def stage_arrow(self, staging: str, data: Any) -> None: ...

    @abstractmethod
    def table_columns(self, name: str, schema: str | None = None) -> list[Column] | None: ...

    @abstractmethod
    def staging_tables(self) -> list[str]: ...

    # statements built once per session ------------------------------------------------------

    def _new_caches(self) -> None:
        # Statements that are the same for every partition of a session, built once.
        self._statements = {}
        self._published_columns = {}
        # per staging table, the rows it was created with, where the driver told
        self._staged_rows = {}

    def _statement(self, key: tuple[object, ...], build: Callable[[], str]) -> str:
        """SQL built once per session: the same model, staging slot and checks give the same
        statement for every batch; only the bound values change."""
        statement = self._statements.get(key)
        if statement is None:
            statement = self._statements[key] = build()
        return statement

    def _drop_statement(self, staging: str) -> str:
        return self._statement(
            ("drop", staging), lambda: sql.drop_table(self._staged(staging), self.flavor)
        )

    # staging and checks -----------------------------------------------------------------------

    def stage(self, staging: str, sql_text: str, bounds: Mapping[str, Any]) -> None:
        statement = self._statement(
            ("stage", staging, sql_text),
            lambda: self._create_staging(self._staged(staging), sql_text),
        )
        try:
            created = self._run(statement, self._bind(bounds, statement))
        except EngineError:
            self.drop_staging(staging)
            raise
        rows = self._rows_created(created)
        if rows is not None:
            self._staged_rows[staging] = rows

    def read_arrow(self, table: str, time_column: str | None, bounds: Mapping[str, Any]) -> Any:
        statement = self._statement(
            ("read", table, time_column),
            lambda: sql.select_all(
                sql.table(table),
                None if time_column is None else sql.partition_predicate(time_column, False),
                self.flavor,
            ),
        )
        values = self._bind(bounds, statement) if time_column is not None else {}
        return self._fetch_arrow(statement, values)

    def measure(self, check: CheckSpec, staging: str, bounds: Mapping[str, Any]) -> int | None:
        statement = sql.check_measure(check, self._staged(staging), self.flavor)
        value = self._one(statement, self._bind(bounds, statement))[0]
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
                self._staged(staging),
                {name: sql.table(physical) for name, physical in tables.items()},
                partition_column,
                grain,
                self.flavor,
            ),
        )
        rows = self._run(statement).fetchall()
        if grain is None:
            return {None: int(rows[0][0])}
        return {None if r[0] is None else int(r[0]): int(r[1]) for r in rows}

    def checksum(self, staging: str, columns: Sequence[str]) -> Checksum:
        rows, digest = self._one(sql.checksum(self._staged(staging), columns, None, self.flavor))
        return Checksum(int(rows), int(digest))

    # cursors ------------------------------------------------------------------------------------

    def cursor_extent(self, table: str, column: str) -> tuple[Any, Any, str | None]:
        transactions = self.capabilities.cursor_snapshots
        statement = self._statement(
            ("cursor extent", table, column),
            lambda: cursor_sql.cursor_extent(table, column, transactions, self.flavor),
        )
        row = self._one(statement)
        return row[0], row[1], ((row[2] or "") if transactions else None)

    def cursor_unique(self, table: str, column: str) -> bool:
        return False  # unknown here: DuckDB and PostgreSQL read their constraints

    def open_transactions(self) -> str:
        statement = self._statement(
            ("open transactions",), lambda: cursor_sql.open_transactions(self.flavor)
        )
        return str(self._one(statement)[0] or "")

    def cursor_batch_end(
        self, table: str, column: str, bounds: Mapping[str, Any], rows: int
    ) -> Any | None:
        statement = self._statement(
            ("cursor batch", table, column),
            lambda: cursor_sql.batch_end(table, column, self.flavor),
        )
        found = self._run(statement, self._bind({**bounds, "offset": rows - 1}, statement))
        row = found.fetchone()
        return None if row is None else row[0]

    def cursor_fingerprint(
        self,
        table: str,
        column: str,
        bounds: Mapping[str, Any],
        aggregates: Sequence[str] = (),
    ) -> tuple[Checksum, list[str | None]]:
        statement = self._statement(
            ("cursor fingerprint", table, column, tuple(aggregates)),
            lambda: cursor_sql.interval_fingerprint(
                table, column, self._all_columns(table), aggregates, self.flavor
            ),
        )
        return self._fingerprint(statement, bounds)

    def key_fingerprint(
        self,
        table: str,
        key_column: str,
        bounds: Mapping[str, Any],
        aggregates: Sequence[str] = (),
    ) -> tuple[Checksum, list[str | None]]:
        statement = self._statement(
            ("key fingerprint", table, key_column, tuple(aggregates)),
            lambda: sql.checksum(
                sql.table(table),
                self._all_columns(table),
                sql.partition_predicate(key_column, keyed=True),
                self.flavor,
                aggregates,
            ),
        )
        return self._fingerprint(statement, bounds)

    def _fingerprint(
        self, statement: str, bounds: Mapping[str, Any]
    ) -> tuple[Checksum, list[str | None]]:
        rows, digest, *values = self._one(statement, self._bind(bounds, statement))
        # the aggregates are cast to text in the statement; a driver may still hand back others
        return Checksum(int(rows), int(digest)), [None if v is None else str(v) for v in values]

    def source_fingerprint(
        self, table: str, time_column: str, bounds: Mapping[str, Any]
    ) -> Checksum:
        # a key-list partition has no time window: it reads the whole source
        windowed = "start" in bounds
        source = sql.table(table)

        def build() -> str:
            where = sql.partition_predicate(time_column, False) if windowed else None
            return sql.checksum(source, self._all_columns(table), where, self.flavor)

        statement = self._statement(("fingerprint", table, time_column, windowed), build)
        rows, digest = self._one(statement, self._bind(bounds, statement))
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
        source = self._staged(table) if staged else sql.table(table)
        # a staging table holds only its batch; a source is read in the $start/$end window
        windowed = bounds is not None and not staged
        # A few staged rows are digested here from their values as text: the engine would
        # spend longer planning the digest's expressions than this takes to hash them.
        staged_rows = self._staged_rows.get(table) if staged else None
        listed = columns is not None and staged_rows is not None and staged_rows <= LISTED_ROWS
        # and their `unique` checks counted from those texts, where they equal the values
        listed_columns = list(columns or ()) if listed else []
        textual = self._textual_columns(table).intersection(listed_columns) if listed else set()
        counted_here = {
            i: [listed_columns.index(c) for c in check.params["columns"]]
            for i, check in enumerate(checks)
            if check.kind == "unique" and set(check.params["columns"]) <= textual
        }
        in_sql = [c for i, c in enumerate(checks) if i not in counted_here]
        key = (
            "profile",
            table,
            staged,
            partition_column,
            grain,
            windowed,
            None if columns is None else tuple(columns),
            tuple(_check_key(c) for c in in_sql),
            tuple(aggregates),
            listed,
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
                in_sql,
                aggregates,
                self.flavor,
                listed,
            )

        statement = self._statement(key, build)
        rows = self._run(statement, self._bind(bounds or {}, statement)).fetchall()
        width = len(in_sql)

        def measured(row: Sequence[Any]) -> tuple[int | None, ...]:
            from_sql = iter(row[3 : 3 + width])
            return tuple(
                repeated_keys(row[2], counted_here[i])
                if i in counted_here
                else _integer(next(from_sql))
                for i in range(len(checks))
            )

        return {
            None if r[0] is None else int(r[0]): PartitionProfile(
                Checksum(int(r[1]), digest_of(r[2]) if listed else int(r[2])),
                measured(r),
                tuple(None if v is None else str(v) for v in r[3 + width :]),
            )
            for r in rows
        }

    def count_in_window(self, table: str, time_column: str, bounds: Mapping[str, Any]) -> int:
        statement = self._statement(
            ("count", table, time_column),
            lambda: sql.count_rows(
                sql.table(table), sql.partition_predicate(time_column, False), self.flavor
            ),
        )
        return int(self._one(statement, self._bind(bounds, statement))[0])

    def staged_aggregates(self, staging: str, expressions: Sequence[str]) -> list[str | None]:
        statement = self._statement(
            ("aggregates", staging, tuple(expressions)),
            lambda: sql.aggregates(self._staged(staging), expressions, None, self.flavor),
        )
        row = self._one(statement)
        # the aggregates are cast to text in the statement; a driver may still hand back others
        return [None if v is None else str(v) for v in row]

    def aggregates_by_partition(
        self,
        table: str,
        staged: bool,
        time_column: str,
        grain: str,
        expressions: Sequence[str],
        bounds: Mapping[str, Any],
    ) -> dict[int, list[str | None]]:
        source = self._staged(table) if staged else sql.table(table)
        statement = sql.grouped_aggregates(source, time_column, grain, expressions, self.flavor)
        rows = self._run(statement, self._bind(bounds, statement)).fetchall()
        # the aggregates are cast to text in the statement; a driver may still hand back others
        return {int(row[0]): [None if v is None else str(v) for v in row[1:]] for row in rows}

    # comparing two relations ------------------------------------------------------------------

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
                self._rows(relation), columns, numeric, window is not None, self.flavor
            ),
        )
        values = self._window_values(relation, window)
        found: dict[int, PartitionSummary] = {}
        for row in self._run(statement, self._bind(values, statement)).fetchall():
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
                self._rows(left), self._rows(right), key, compared, sample, self.flavor
            ),
        )
        values = {**self._window_values(left, window), "tolerance": tolerance}
        names = [name for name, _ in compared]
        found: dict[int, dict[str, KeyDifference]] = {}
        for row in self._run(statement, self._bind(values, statement)).fetchall():
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

    def drop_staging(self, staging: str | None = None) -> int:
        names = [self._staging_table(staging)] if staging is not None else self.staging_tables()
        for name in names:
            self._run(self._drop_statement(name))
        if staging is None:
            self._staged_rows.clear()
        else:
            self._staged_rows.pop(staging, None)
        return len(names)


def _integer(value: Any) -> int | None:
    return None if value is None else int(value)


def _check_key(check: CheckSpec) -> tuple[object, ...]:
    return (check.name, check.kind, check.severity.value, repr(sorted(check.params.items())))
