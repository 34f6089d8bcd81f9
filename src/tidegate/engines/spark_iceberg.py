"""Spark computing, Iceberg tables published (`engine = "spark"`, `tables = "iceberg"`).

Models run and stage in Spark as on Spark's own tables. A publish writes the window's new rows
(by the write mode) in one Spark job as Parquet files under the table's folder, one directory
per partition; the Iceberg catalog adds those files on a branch of the attempt's own
(iceberg_tables.py), Spark audits the files the branch holds against what was staged, and main
moves while the lease's fence is held. Several processes and machines publish side by side:
each reads the catalog anew, and a lost race publishes nothing. Published tables are read
through views over the files of main's snapshot.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyiceberg.expressions import AlwaysTrue

from tidegate.crash import crash_point
from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError
from tidegate.domain.model import Column, WriteMode
from tidegate.engines.arrow_types import arrow_type
from tidegate.engines.base import EVERY, Capabilities, CommitMarker, Fence, Target
from tidegate.engines.iceberg_tables import (
    MODEL_PROPERTY,
    DataFiles,
    IcebergTables,
    refuse_incomplete,
    tables_folder,
)
from tidegate.engines.iceberg_types import duckdb_type, window_filter
from tidegate.engines.spark import SparkEngine
from tidegate.engines.spark_catalog import CatalogPlace
from tidegate.engines.spark_layout import Layout
from tidegate.engines.spark_publish import publish_slots
from tidegate.engines.spark_session import SessionSettings
from tidegate.sql.model_sql import SqlProblem, parse_type

# where a publish writes its files in a table's folder (Iceberg's own writers use data/)
WRITTEN_FOLDER = "data/tidegate"
# the columns a model declares without NULLs: Spark's files declare every column optional, and
# Iceberg adds only files whose columns are as required as the table's
REQUIRED_PROPERTY = "tidegate.required"


class SparkIcebergEngine(SparkEngine):
    capabilities = Capabilities(
        transactional_publish=True, single_writer_process=False, restores=True
    )

    def __init__(
        self,
        session: SessionSettings,
        layout: Layout,
        fences: CatalogPlace,
        tables: IcebergTables,
        read_only: bool = False,
    ) -> None:
        self.tables = tables
        self._owns_tables = True
        # per table: the metadata file its view's files were read from, and them
        self._files: dict[tuple[str, str | None], tuple[str, list[Column], tuple[str, ...]]] = {}
        try:
            super().__init__(session, layout, fences, read_only=read_only)
        except BaseException:
            tables.close()
            raise

    # published tables ------------------------------------------------------------------------

    def _table(self, name: str, schema: str | None) -> Any:
        """The model's Iceberg table as the catalog holds it now, or None (a table of that name
        that no model publishes is not tidegate's)."""
        table = self.tables.load(name, schema)
        if table is None or table.properties.get(MODEL_PROPERTY) != name:
            return None
        return table

    def _published(
        self, name: str, schema: str | None
    ) -> tuple[list[Column], tuple[str, ...]] | None:
        table = self._table(name, schema)
        if table is None:
            return None
        known = self._files.get((name, schema))
        if known is not None and known[0] == table.metadata_location:
            return known[1], known[2]
        columns = _columns(table)
        snapshot = table.metadata.current_snapshot_id
        files = () if snapshot is None else tuple(self.tables.data_files(table, snapshot, _ALL))
        self._files[(name, schema)] = (table.metadata_location, columns, files)
        return columns, files

    # publish ---------------------------------------------------------------------------------

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
            raise EngineError("iceberg: cursor models publish into DuckDB tables only")
        if target.write_mode is WriteMode.MERGE and not target.unique_key:
            raise ValueError(f"{target.name}: a merge matches rows by a unique key; none given")
        refuse_incomplete(markers)
        if target.write_mode is WriteMode.APPEND and not target.unique_key:
            self.tables.refuse_republished(target.name, target.schema, markers)
        created = self.tables.load(target.name, target.schema) is None
        table = self._table_for(target, markers)
        columns = _columns(table)
        folder = self._folder(table, markers)
        try:
            self._write(
                target,
                staging,
                columns,
                None if created else columns,
                publish_slots(target, bounds, markers),
                bounds,
                folder,
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
                    return self._catalog.holding(fence)

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
            shutil.rmtree(folder, ignore_errors=True)
            if created:  # a failed first publish leaves no table behind
                self.tables.drop(target.name, target.schema)
            raise
        with contextlib.suppress(EngineError):
            self.drop_staging(staging)
        return content

    def _table_for(self, target: Target, markers: Sequence[CommitMarker]) -> Any:
        """The model's Iceberg table, created (partitioned by the grain) or given the target's
        new columns. Every Iceberg column is optional, as in Spark's files; which ones the
        model declares without NULLs is the table's property."""
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
        table = self.tables.load(target.name, target.schema)
        if table is not None and table.properties.get(MODEL_PROPERTY) != target.name:
            raise EngineError(
                f"iceberg: the catalog holds a table {'.'.join(table.name())} that no model "
                "publishes; tidegate publishes only into tables it made: rename the model"
            )
        if table is None:
            grain = (
                "key" if target.keyed else target.grain or (markers[0].grain if markers else None)
            )
            table = self.tables.create(
                target.name,
                target.schema,
                arrow_schema,
                [],
                target.partition_column,
                grain,
                {
                    MODEL_PROPERTY: target.name,
                    REQUIRED_PROPERTY: json.dumps(
                        [c.name for c in target.columns if not c.nullable]
                    ),
                },
            )
        return self.tables.evolve(table, arrow_schema)

    def _folder(self, table: Any, markers: Sequence[CommitMarker]) -> str:
        """A fresh folder of one publish in the table's, named after its first attempt."""
        root = tables_folder(table.location())
        if root is None:
            raise EngineError(f"iceberg: the files of {'.'.join(table.name())} are not local")
        attempt = markers[0].attempt_id if markers else "unmarked"
        return f"{root.rstrip('/')}/{WRITTEN_FOLDER}-{attempt}-{uuid.uuid4().hex[:12]}"

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

    # earlier publishes -------------------------------------------------------------------------

    def stage_restored(
        self, staging: str, target: Target, attempt_id: str, bounds: Mapping[str, Any]
    ) -> None:
        table = self._table(target.name, target.schema)
        snapshot = None if table is None else self.tables.snapshot_of(table, attempt_id)
        if table is None or snapshot is None:
            raise EngineError(
                f"iceberg: {target.name} holds no snapshot of attempt {attempt_id} (it never "
                "published there, or `tidegate maintain` expired it)"
            )
        window = window_filter(table.schema(), target.partition_column, bounds)
        files = self.tables.data_files(table, snapshot.snapshot_id, window)
        gone = [f for f in files if not Path(f).exists()]
        if gone:
            raise EngineError(
                f"iceberg: the files attempt {attempt_id} wrote are gone ({gone[0]}); "
                f"recompute with `tidegate rerun {target.name} --partitions …`"
            )
        self.drop_staging(staging)
        self._stage_frame(staging, self._views.frame(target.columns, files))

    # markers -----------------------------------------------------------------------------------

    def markers(self, attempt_ids: Sequence[str]) -> dict[str, CommitMarker]:
        return self.tables.markers(attempt_ids)

    def markers_of(
        self, model: str, start: int = EVERY[0], end: int = EVERY[1]
    ) -> list[CommitMarker]:
        return self.tables.markers_of(model, start, end)

    def handle(self) -> SparkIcebergEngine:
        twin = super().handle()
        if not isinstance(twin, SparkIcebergEngine):  # SparkEngine.handle makes this type
            raise TypeError("a handle of another engine")
        twin.tables, twin._files = self.tables, self._files
        twin._owns_tables = False
        return twin

    def close(self) -> None:
        closing = not self._closed
        super().close()
        if closing and self._owns_tables:
            self.tables.close()


_ALL = AlwaysTrue()


def _columns(table: Any) -> list[Column]:
    required = set(json.loads(table.properties.get(REQUIRED_PROPERTY, "[]")))
    return [
        _column(f.name, duckdb_type(f.field_type), f.name not in required)
        for f in table.schema().fields
    ]


def _column(name: str, type_text: str, nullable: bool) -> Column:
    try:
        return Column(name, parse_type(type_text), nullable)
    except SqlProblem:
        raise EngineError(
            f"iceberg: column {name} has type {type_text}, which tidegate cannot name; cast it"
        ) from None


def _parquet_files(folder: str) -> list[str]:
    """The data files a Spark job wrote into a folder (not its markers and checksums)."""
    return sorted(str(p) for p in Path(folder).rglob("*.parquet") if not p.name.startswith("."))
