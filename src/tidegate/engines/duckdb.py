"""DuckDB: the embedded default warehouse. One writing process per file (SPEC §7)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import BusyError, EngineError, UsageError
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
from tidegate.engines.duckdb_publish import DuckDBPublish
from tidegate.sql import diff as diff_sql
from tidegate.sql import statements as sql
from tidegate.sql.model_sql import SqlProblem, parse_type

WAIT_STEP_SECONDS = 0.2


def _column(name: str, type_text: str, nullable: bool) -> Column:
    try:
        return Column(name, parse_type(type_text), nullable)
    except SqlProblem:
        raise EngineError(
            f"duckdb: column {name} has type {type_text}, which tidegate cannot name; cast it"
        ) from None


def _is_lock_conflict(error: Exception) -> bool:
    return "lock" in str(error).lower()


class DuckDBEngine(DuckDBPublish):
    name = "duckdb"
    capabilities = Capabilities(transactional_publish=True, single_writer_process=True)

    def __init__(
        self,
        path: Path,
        wait: bool = False,
        wait_timeout: float | None = None,
        on_wait: Callable[[str], None] | None = None,
        read_only: bool = False,
    ) -> None:
        self.path = path
        self._con = self._connect(path, wait, wait_timeout, on_wait, read_only)
        self._con.execute("SET TimeZone = 'UTC'")
        # Statements that are the same for every partition of a session, built once.
        self._statements: dict[tuple[object, ...], str] = {}
        self._published_columns: dict[tuple[str | None, str], list[Column]] = {}

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

    def _run(self, statement: str, params: Any = None) -> Any:
        try:
            return self._con.execute(statement, params)
        except duckdb.InterruptException:
            raise KeyboardInterrupt from None
        except duckdb.Error as error:
            message = str(error).splitlines()[0]
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
        rows = self._run(sql.published_columns(), [schema or "main", name]).fetchall()
        if not rows:
            return None
        return [_column(r[0], r[1], r[2] == "YES") for r in rows]

    def query_columns(self, sql_text: str, bounds: Mapping[str, Any]) -> list[Column]:
        statement = sql.describe_query(sql_text)
        rows = self._run(statement, self._only(bounds, statement)).fetchall()
        return [_column(r[0], r[1], True) for r in rows]

    def stage(self, staging: str, sql_text: str, bounds: Mapping[str, Any]) -> None:
        statement = self._statement(
            ("stage", staging, sql_text),
            lambda: sql.create_table_as(sql.staged(staging), sql_text),
        )
        try:
            self._run(statement, self._only(bounds, statement))
        except EngineError:
            self.drop_staging(staging)
            raise

    def staging_columns(self, staging: str) -> list[Column]:
        source = sql.staged(staging)
        described = self._run(
            self._statement(("describe", staging), lambda: sql.describe(source))
        ).fetchall()
        names = [row[0] for row in described]
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
            _column(row[0], row[1], bool(count))
            for row, count in zip(described, nulls or (), strict=False)
        ]

    def measure(self, check: CheckSpec, staging: str, bounds: Mapping[str, Any]) -> int | None:
        statement = sql.check_measure(check, sql.staged(staging))
        row = self._run(statement, self._only(bounds, statement)).fetchone()
        return None if row[0] is None else int(row[0])

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
                sql.staged(staging),
                {name: sql.table(physical) for name, physical in tables.items()},
                partition_column,
                grain,
            ),
        )
        rows = self._run(statement).fetchall()
        if grain is None:
            return {None: int(rows[0][0])}
        return {None if r[0] is None else int(r[0]): int(r[1]) for r in rows}

    def checksum(self, staging: str, columns: Sequence[str]) -> Checksum:
        statement = sql.checksum(sql.staged(staging), columns, None)
        rows, digest = self._run(statement).fetchone()
        return Checksum(int(rows), int(digest))

    def source_fingerprint(
        self, table: str, time_column: str, bounds: Mapping[str, Any]
    ) -> Checksum:
        # a key-list partition has no time window: it reads the whole source
        windowed = "start" in bounds
        source = sql.table(table)

        def build() -> str:
            where = sql.partition_predicate(time_column, False) if windowed else None
            return sql.checksum(source, self._all_columns(source), where)

        statement = self._statement(("fingerprint", table, time_column, windowed), build)
        rows, digest = self._run(statement, self._only(bounds, statement)).fetchone()
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
        source = sql.staged(table) if staged else sql.table(table)
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
            names = list(columns) if columns is not None else self._all_columns(source)
            return sql.grouped_checksums(
                source,
                names,
                partition_column,
                grain,
                windowed,
                columns is None,
                checks,
                aggregates,
            )

        statement = self._statement(key, build)
        rows = self._run(statement, self._only(bounds or {}, statement)).fetchall()
        width = len(checks)
        return {
            None if r[0] is None else int(r[0]): PartitionProfile(
                Checksum(int(r[1]), int(r[2])),
                tuple(None if v is None else int(v) for v in r[3 : 3 + width]),
                tuple(None if v is None else str(v) for v in r[3 + width :]),
            )
            for r in rows
        }

    def _statement(self, key: tuple[object, ...], build: Callable[[], str]) -> str:
        """SQL built once per session: the same model, staging slot and checks give the same
        statement for every batch; only the bound values change."""
        statement = self._statements.get(key)
        if statement is None:
            statement = self._statements[key] = build()
        return statement

    def _drop_statement(self, staging: str) -> str:
        return self._statement(("drop", staging), lambda: sql.drop_table(sql.staged(staging)))

    def _all_columns(self, source: Any) -> list[str]:
        return [row[0] for row in self._run(sql.describe(source)).fetchall()]

    def count_in_window(self, table: str, time_column: str, bounds: Mapping[str, Any]) -> int:
        statement = self._statement(
            ("count", table, time_column),
            lambda: sql.count_rows(sql.table(table), sql.partition_predicate(time_column, False)),
        )
        return int(self._run(statement, self._only(bounds, statement)).fetchone()[0])

    def aggregates_by_partition(
        self,
        table: str,
        staged: bool,
        time_column: str,
        grain: str,
        expressions: Sequence[str],
        bounds: Mapping[str, Any],
    ) -> dict[int, list[str | None]]:
        source = sql.staged(table) if staged else sql.table(table)
        statement = sql.grouped_aggregates(source, time_column, grain, expressions)
        rows = self._run(statement, self._only(bounds, statement)).fetchall()
        return {int(row[0]): list(row[1:]) for row in rows}

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
                self._rows(relation), columns, numeric, window is not None
            ),
        )
        values = self._window_values(relation, window)
        found: dict[int, PartitionSummary] = {}
        for row in self._run(statement, self._only(values, statement)).fetchall():
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
                self._rows(left), self._rows(right), key, compared, sample
            ),
        )
        values = {**self._window_values(left, window), "tolerance": tolerance}
        names = [name for name, _ in compared]
        found: dict[int, dict[str, KeyDifference]] = {}
        for row in self._run(statement, self._only(values, statement)).fetchall():
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

    def handle(self) -> DuckDBEngine:
        """Another handle on the same database for a worker thread (a DuckDB cursor)."""
        twin = DuckDBEngine.__new__(DuckDBEngine)
        twin.path = self.path
        twin._con = self._con.cursor()
        twin._con.execute("SET TimeZone = 'UTC'")
        twin._statements = {}
        twin._published_columns = {}
        return twin

    def markers(self, attempt_ids: Sequence[str]) -> dict[str, CommitMarker]:
        found: dict[str, CommitMarker] = {}
        ids = list(attempt_ids)
        for offset in range(0, len(ids), 500):
            chunk = ids[offset : offset + 500]
            for row in self._run(sql.select_markers(len(chunk)), chunk).fetchall():
                marker = CommitMarker(*row)
                found[marker.attempt_id] = marker
        return found

    def staging_tables(self) -> list[str]:
        rows = self._run(sql.tables_in_catalog(), [sql.STAGING_CATALOG]).fetchall()
        return sorted(r[0] for r in rows)

    def drop_staging(self, staging: str | None = None) -> int:
        names = [staging] if staging is not None else self.staging_tables()
        for name in names:
            self._run(self._drop_statement(name))
        return len(names)

    def interrupt(self) -> None:
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
        """Create the reference `orders` source (SPEC §2); returns its row count."""
        from tidegate.sql.example_data import CREATE_ORDERS, DAYS

        self._run(CREATE_ORDERS, {"rows_per_day": rows_per_day, "seed": seed, "days": DAYS})
        return int(self._run(sql.count_rows(sql.table("orders"))).fetchone()[0])


def _check_key(check: CheckSpec) -> tuple[object, ...]:
    return (check.name, check.kind, check.severity.value, repr(sorted(check.params.items())))
