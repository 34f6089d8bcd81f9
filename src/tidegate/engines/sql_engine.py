"""What the SQL warehouses (DuckDB, PostgreSQL) do alike: stage, measure, profile, compare and
publish by building statements in `sql/` with the engine's flavor, running them and reading the
rows back. Each engine gives the hooks: its flavor, where a staged table lives, how a statement
runs and binds its values, how a table's columns are read, and its publish transaction."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, ClassVar

from sqlglot import exp

from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError, FencedError
from tidegate.domain.model import CheckSpec, Column, WriteMode
from tidegate.engines.base import (
    CommitMarker,
    Fence,
    KeyDifference,
    PartitionProfile,
    PartitionSummary,
    Relation,
    Target,
    window_bounds,
)
from tidegate.sql import diff as diff_sql
from tidegate.sql import statements as sql
from tidegate.sql import write_modes as write_sql
from tidegate.sql.statements import Flavor

Params = Mapping[str, Any] | Sequence[Any]


class SqlEngine(ABC):
    """The shared half of an engine that speaks SQL; the engine subclass gives the hooks."""

    flavor: ClassVar[Flavor]
    _statements: dict[tuple[object, ...], str]
    _published_columns: dict[tuple[str | None, str], list[Column]]

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

    @staticmethod
    @abstractmethod
    def _insert_markers() -> str: ...

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
    def _ensure_target_schema(self, schema: str | None) -> None:
        """The schema a new published table goes in exists."""

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[None]:
        """One transaction: its statements commit together or not at all."""

    @abstractmethod
    def _publish_transaction(self, staging: str) -> AbstractContextManager[None]:
        """One transaction around a publish's writes and markers."""

    @abstractmethod
    def _hold_target(self, target: Target) -> None:
        """In a publish's transaction, before it reads the target's columns: writers that share
        the warehouse publish into one table one at a time."""

    @abstractmethod
    def _after_publish(self, staging: str) -> None:
        """What follows a committed publish."""

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
            self._run(statement, self._bind(bounds, statement))
        except EngineError:
            self.drop_staging(staging)
            raise

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
                self.flavor,
            )

        statement = self._statement(key, build)
        rows = self._run(statement, self._bind(bounds or {}, statement)).fetchall()
        width = len(checks)
        return {
            None if r[0] is None else int(r[0]): PartitionProfile(
                Checksum(int(r[1]), int(r[2])),
                tuple(None if v is None else int(v) for v in r[3 : 3 + width]),
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

    # markers and staging tables ---------------------------------------------------------------

    def markers(self, attempt_ids: Sequence[str]) -> dict[str, CommitMarker]:
        found: dict[str, CommitMarker] = {}
        ids = list(attempt_ids)
        for offset in range(0, len(ids), 500):
            chunk = ids[offset : offset + 500]
            for row in self._run(sql.select_markers(len(chunk), self.flavor), chunk).fetchall():
                marker = CommitMarker(*row)
                found[marker.attempt_id] = marker
        return found

    def drop_staging(self, staging: str | None = None) -> int:
        names = [self._staging_table(staging)] if staging is not None else self.staging_tables()
        for name in names:
            self._run(self._drop_statement(name))
        return len(names)

    # publish ----------------------------------------------------------------------------------

    def publish(
        self,
        target: Target,
        staging: str,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        fence: Fence | None = None,
    ) -> dict[int, Checksum]:
        where = (target.schema, target.name)
        writes = self._writes(target, staging)
        marker_insert = self._statement(("markers",), self._insert_markers)
        content: dict[int, Checksum] = {}
        with self._publish_transaction(staging):
            if fence is not None:
                self._hold_fence(fence)
            self._hold_target(target)
            # One writer holds the warehouse, so the columns it last saw or wrote are still
            # there; writers sharing it read them under the target's lock.
            existing = self._published_columns.get(where) or self.table_columns(
                target.name, target.schema
            )
            self._evolve(target, existing)
            if target.write_mode is WriteMode.APPEND and not target.unique_key:
                self._refuse_republish(markers)
            for statement in writes:
                self._run(statement, self._bind(bounds, statement))
            if target.write_mode is not WriteMode.OVERWRITE and markers:
                content = self._content(target, bounds, markers)
                markers = [replace(m, checksum=str(content[m.partition_start])) for m in markers]
            if markers:
                self._run(
                    marker_insert,
                    {n: [getattr(m, n) for m in markers] for n in sql.MARKER_COLUMNS},
                )
        self._published_columns[where] = (
            list(target.columns)
            if existing is None
            else [
                *existing,
                *[c for c in target.columns if c.name not in {e.name for e in existing}],
            ]
        )
        self._after_publish(staging)
        return content

    def raise_fence(self, fence: Fence) -> None:
        self._run(sql.fences_ddl(self.flavor))  # made by prepare where writers share a warehouse
        with self._transaction():
            for key in sorted(fence.keys):  # one order for every writer: no deadlock
                values = {"fence_key": key, "token": fence.token}
                for statement in (sql.add_fence(self.flavor), sql.raise_fence(self.flavor)):
                    self._run(statement, self._bind(values, statement))

    def _hold_fence(self, fence: Fence) -> None:
        statement = self._statement(("hold fence",), lambda: sql.hold_fence(self.flavor))
        for key in sorted(fence.keys):
            values = {"fence_key": key, "token": fence.token}
            if self._run(statement, self._bind(values, statement)).fetchone() is None:
                raise FencedError(
                    f"fenced: a newer lease holds partition {key.rsplit('/', 1)[-1]} (token "
                    f"{fence.token} is stale); nothing was published"
                )

    def _evolve(self, target: Target, existing: list[Column] | None) -> None:
        """Create the published table, or add the target's new columns (nullable)."""
        published = sql.table(target.name, target.schema)
        if existing is None:
            self._ensure_target_schema(target.schema)
            self._run(sql.create_table(published, target.columns, flavor=self.flavor))
            return
        known = {c.name for c in existing}
        for col in target.columns:
            if col.name not in known:
                self._run(sql.add_column(published, Column(col.name, col.type), self.flavor))

    def _writes(self, target: Target, staging: str) -> list[str]:
        """The statements that write the staged rows as the target's write mode says, built
        once per target and staging slot."""
        published = sql.table(target.name, target.schema)
        source = self._staged(staging)
        at, key, flavor = target.partition_column, target.unique_key, self.flavor
        insert = self._statement(
            ("insert", target.schema, target.name, target.columns, staging),
            lambda: sql.insert_from(published, target.columns, source, flavor),
        )
        if target.write_mode is WriteMode.OVERWRITE:
            delete = self._statement(
                ("delete", target.schema, target.name, at, target.keyed),
                lambda: sql.delete_partition(published, at, target.keyed, flavor),
            )
            return [delete, insert]
        if not key:
            if target.write_mode is WriteMode.MERGE:
                raise ValueError(f"{target.name}: a merge matches rows by a unique key; none given")
            return [insert]
        grain = None if target.keyed else _grain(target)
        if target.write_mode is WriteMode.MERGE:
            matched = self._statement(
                ("delete matched", target, staging),
                lambda: write_sql.delete_matched(
                    published, source, at, target.keyed, key, grain, flavor
                ),
            )
            return [matched, insert]
        unmatched = self._statement(
            ("insert unmatched", target, staging),
            lambda: write_sql.insert_unmatched(
                published, target.columns, source, at, target.keyed, key, grain, flavor
            ),
        )
        return [unmatched]

    def _refuse_republish(self, markers: Sequence[CommitMarker]) -> None:
        """Append without a unique key writes a partition once: one with a marker refuses."""
        for model in sorted({m.model for m in markers}):
            starts = sorted({m.partition_start for m in markers if m.model == model})
            statement = write_sql.published_starts(len(starts), self.flavor)
            found = self._run(statement, [model, *starts]).fetchall()
            if found:
                raise EngineError(
                    f"{model}: append without a unique key publishes a partition once; "
                    f"{len(found)} of these partitions are published already, and appending "
                    "again would duplicate their rows"
                )

    def _content(
        self, target: Target, bounds: Mapping[str, Any], markers: Sequence[CommitMarker]
    ) -> dict[int, Checksum]:
        """What each marked partition holds now, read inside the publish's transaction."""
        published = sql.table(target.name, target.schema)
        names = [c.name for c in target.columns]
        grain = None if target.keyed else _grain(target)
        statement = self._statement(
            ("content", target),
            lambda: write_sql.partition_content(
                published, names, target.partition_column, grain, self.flavor
            ),
        )
        rows = self._run(statement, self._bind(bounds, statement)).fetchall()
        if target.keyed:
            # a key list's partition is a unit of its own: one marker, one row
            return {m.partition_start: Checksum(int(rows[0][0]), int(rows[0][1])) for m in markers}
        measured = {int(r[0]): Checksum(int(r[1]), int(r[2])) for r in rows if r[0] is not None}
        return {m.partition_start: measured.get(m.partition_start, Checksum(0, 0)) for m in markers}


def _check_key(check: CheckSpec) -> tuple[object, ...]:
    return (check.name, check.kind, check.severity.value, repr(sorted(check.params.items())))


def _grain(target: Target) -> str:
    if target.grain is None:
        raise ValueError(f"{target.name}: a {target.write_mode.value} by time needs the grain")
    return target.grain
