"""Spark's publish into Iceberg tables (docs/engines/spark.md): the new rows of every partition
of the window (by the write mode) are written in one Spark job as Parquet files under the table's
folder, one directory per partition; the Iceberg catalog adds those files on a branch of the
attempt's own (iceberg_tables.py), Spark audits the files the branch holds against what was
staged, and main moves while the lease's fence is held.

A crash before main moves leaves a branch no reader follows and files no snapshot of main
references (`tidegate maintain` removes both once older than `keep`); a writer that lost the race
for a partition publishes nothing.
"""

from __future__ import annotations

import contextlib
import json
from abc import abstractmethod
from calendar import timegm
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

from tidegate.crash import crash_point
from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError
from tidegate.domain.model import Column, WriteMode
from tidegate.engines.arrow_types import arrow_type
from tidegate.engines.base import CommitMarker, Fence, Target
from tidegate.engines.iceberg_tables import (
    MODEL_PROPERTY,
    DataFiles,
    IcebergTables,
    publish_folder,
    refuse_incomplete,
    tables_folder,
)
from tidegate.engines.iceberg_types import duckdb_type
from tidegate.engines.spark_fences import Fences
from tidegate.engines.spark_views import Views
from tidegate.engines.sql_queries import Params, SqlQueries
from tidegate.sql import spark as spark_sql
from tidegate.sql import statements as sql
from tidegate.sql import write_modes as write_sql
from tidegate.sql.model_sql import SqlProblem, parse_type
from tidegate.sql.spark import SLOT_COLUMN, SPARK

# The staging name a just-written folder is read under (no staging slot takes it: the
# executor's names are identifiers). The publisher of a process is serial.
WRITTEN = "tidegate:written"
# the columns a model declares without NULLs: Spark's files declare every column optional, and
# Iceberg adds only files whose columns are as required as the table's
REQUIRED_PROPERTY = "tidegate.required"


class SparkPublish(SqlQueries):
    """The publish of SparkEngine, which provides the session, views, tables and fences."""

    tables: IcebergTables
    _fences: Fences
    _views: Views
    _read_only: bool

    @abstractmethod
    def _frame(self, statement: str, params: Params | None = None) -> Any: ...

    @abstractmethod
    def _failure(self, error: Exception) -> BaseException: ...

    @abstractmethod
    def _busy(self) -> AbstractContextManager[None]: ...

    def _table(self, name: str, schema: str | None) -> Any:
        """The model's Iceberg table as the catalog holds it now, or None (a table of that name
        that no model publishes is not tidegate's)."""
        table = self.tables.load(name, schema)
        if table is None or table.properties.get(MODEL_PROPERTY) != name:
            return None
        return table

    def publish(
        self,
        target: Target,
        staging: str,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        fence: Fence | None = None,
    ) -> dict[int, Checksum]:
        if self._read_only:
            raise EngineError("spark: this warehouse was opened read-only")
        if target.cursor:
            raise EngineError("spark: cursor models publish into DuckDB and PostgreSQL only")
        if target.write_mode is WriteMode.MERGE and not target.unique_key:
            raise ValueError(f"{target.name}: a merge matches rows by a unique key; none given")
        refuse_incomplete(markers)
        if target.write_mode is WriteMode.APPEND and not target.unique_key:
            self.tables.refuse_republished(target.name, target.schema, markers)
        existing = self.tables.load(target.name, target.schema)
        created = existing is None
        table = self._table_for(target, markers, existing)
        columns = table_columns(table)
        folder = self._folder(table, markers)
        try:
            self._write(
                target, staging, columns, None if created else columns, bounds, markers, folder
            )
            files = _parquet_files(folder)
            content: dict[int, Checksum] = {}
            expected: dict[int, Checksum] = {}
            if target.write_mode is not WriteMode.OVERWRITE and markers:
                # what the window holds as written: the published rows and the staged ones
                content = expected = self._content(target, columns, bounds, markers, files)
                markers = [replace(m, checksum=str(content[m.partition_start])) for m in markers]
            elif markers:
                expected = self._measure(target, bounds, markers, staging)

            def audit(branch_files: list[str]) -> None:
                self._audit(target, columns, bounds, markers, expected, branch_files)

            holding: Any = nullcontext
            if fence is not None:

                def holding() -> AbstractContextManager[None]:
                    return self._fences.holding(fence)

            self.tables.publish(
                table,
                DataFiles(tuple(files)),
                target.partition_column,
                bounds,
                markers,
                audit,
                written=lambda: crash_point("iceberg_branch_written"),
                holding=holding,
            )
        except BaseException:
            self.tables.discard_unpublished(target.name, target.schema, folder)
            if created:  # a failed first publish leaves no table behind
                self.tables.drop(target.name, target.schema)
            raise
        with contextlib.suppress(EngineError):
            self.drop_staging(staging)
        return content

    def raise_fence(self, fence: Fence) -> None:
        self._fences.raise_fence(fence)

    def _table_for(self, target: Target, markers: Sequence[CommitMarker], table: Any) -> Any:
        """The model's Iceberg table (`table`: as just loaded, or None), created (partitioned
        by the grain) or given the target's new columns. Every Iceberg column is optional, as
        in Spark's files; which ones the model declares without NULLs is the table's
        property."""
        import pyarrow as pa

        fields = []
        for column in target.columns:
            found = arrow_type(column.type)
            if found is None:
                raise EngineError(
                    f"iceberg: {target.name}.{column.name} has type {column.type}, which an "
                    "Iceberg table here cannot hold; cast it"
                )
            fields.append(pa.field(column.name, found))
        arrow_schema = pa.schema(fields)
        if table is not None and table.properties.get(MODEL_PROPERTY) != target.name:
            raise EngineError(
                f"iceberg: the catalog holds a table {'.'.join(table.name())} that no model "
                "publishes; tidegate publishes only into tables it made: rename the model"
            )
        if table is None:
            grain = (
                "key" if target.keyed else target.grain or (markers[0].grain if markers else None)
            )
            required = [c.name for c in target.columns if not c.nullable]
            table = self.tables.create(
                target.name,
                target.schema,
                arrow_schema,
                [],
                target.partition_column,
                grain,
                {MODEL_PROPERTY: target.name, REQUIRED_PROPERTY: json.dumps(required)},
            )
        return self.tables.evolve(table, arrow_schema)

    def _folder(self, table: Any, markers: Sequence[CommitMarker]) -> str:
        """A fresh local folder of one publish in the table's."""
        folder = tables_folder(publish_folder(table.location(), markers))
        if folder is None:
            raise EngineError(f"iceberg: the files of {'.'.join(table.name())} are not local")
        return folder

    def _write(
        self,
        target: Target,
        staging: str,
        columns: Sequence[Column],
        existing: Sequence[Column] | None,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        path: str,
    ) -> None:
        """One Spark job: the window's new rows, typed as the table's `columns`, a folder of
        `path` per partition (Iceberg reads each file's partition from its values)."""
        grain = None if target.keyed or len(markers) <= 1 else target.grain or markers[0].grain
        statement = self._statement(
            ("publish rows", target, staging, tuple(columns), existing is None, grain),
            lambda: spark_sql.publish_rows(
                sql.table(target.name, target.schema),
                self._staged(staging),
                columns,
                [c.name for c in target.columns],
                None if existing is None else [c.name for c in existing],
                target.partition_column,
                target.keyed,
                grain,
                target.write_mode,
                target.unique_key,
            ),
        )
        values = {**bounds, "slot": _first_start(target, bounds, markers)}
        with self._busy():
            frame = self._frame(statement, self._bind(values, statement))
            try:
                frame.write.partitionBy(SLOT_COLUMN).parquet(path)
            except Exception as error:
                raise self._failure(error) from error

    def _audit(
        self,
        target: Target,
        columns: Sequence[Column],
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        expected: Mapping[int, Checksum],
        files: list[str],
    ) -> None:
        """The branch's files of the window hold exactly the rows written: their checksum per
        partition, read by Spark, equals the staged one (for merge and append, the one of the
        window's rows as written)."""
        if not markers:
            return
        found = self._content(target, columns, bounds, markers, files)
        for start, checksum in expected.items():
            if found[start] != checksum:
                raise EngineError(
                    f"iceberg: the files written for {target.name} do not hold the rows staged "
                    f"(partition starting {start}: {found[start]} in the files, {checksum} "
                    "staged); nothing was published"
                )

    def _content(
        self,
        target: Target,
        columns: Sequence[Column],
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        paths: list[str],
    ) -> dict[int, Checksum]:
        """The checksum of what each marked partition holds in these files, read in one pass
        (over the target's columns, like a staged partition's checksum)."""
        self._views.show(self._staged(WRITTEN), columns, paths)
        try:
            return self._measure(target, bounds, markers, WRITTEN)
        finally:
            self.drop_staging(WRITTEN)

    def _measure(
        self,
        target: Target,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        staging: str,
    ) -> dict[int, Checksum]:
        """The checksum of each marked partition's rows of a staged view, in one pass."""
        names = [c.name for c in target.columns]
        grain = None if target.keyed else target.grain or markers[0].grain
        statement = write_sql.partition_content(
            self._staged(staging), names, target.partition_column, grain, SPARK
        )
        rows = self._run(statement, self._bind(bounds, statement)).fetchall()
        if target.keyed:
            return {m.partition_start: Checksum(int(rows[0][0]), int(rows[0][1])) for m in markers}
        measured = {int(r[0]): Checksum(int(r[1]), int(r[2])) for r in rows if r[0] is not None}
        return {m.partition_start: measured.get(m.partition_start, Checksum(0, 0)) for m in markers}


def table_columns(table: Any) -> list[Column]:
    """An Iceberg table's columns in the project's spelling; the model's required ones (the
    table's property) without NULLs."""
    required = set(json.loads(table.properties.get(REQUIRED_PROPERTY, "[]")))
    columns = []
    for field in table.schema().fields:
        type_text = duckdb_type(field.field_type)
        try:
            columns.append(Column(field.name, parse_type(type_text), field.name not in required))
        except SqlProblem:
            raise EngineError(
                f"iceberg: column {field.name} has type {type_text}, which tidegate cannot "
                "name; cast it"
            ) from None
    return columns


def _first_start(target: Target, bounds: Mapping[str, Any], markers: Sequence[CommitMarker]) -> int:
    """The partition a publish of one partition writes (the slot its rows carry): its marker's
    start; without markers (a shadow table of `validate`), the window's."""
    if markers:
        return markers[0].partition_start
    return timegm(bounds["start"].timetuple()) if "start" in bounds else 0


def _parquet_files(folder: str) -> list[str]:
    """The data files a Spark job wrote into a folder (not its markers and checksums)."""
    return sorted(str(p) for p in Path(folder).rglob("*.parquet") if not p.name.startswith("."))
