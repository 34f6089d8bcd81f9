"""DuckDB computing, Iceberg tables published (`[warehouse] tables = "iceberg"`): models run,
stage and audit in the DuckDB file as on DuckDB tables; a publish writes the window's new rows
into the model's Iceberg table through a branch (iceberg_tables.py), audits the files the
branch holds against what the staged rows were audited as, and moves main. The DuckDB file keeps
a copy of each published table, made again from main's files when the table changed, so that
downstream models, checks, `diff` and `verify` read it by name as they read a DuckDB table;
Iceberg sources are read through views over their tables' files."""

from __future__ import annotations

import contextlib
import importlib
import shutil
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pyiceberg.expressions import AlwaysTrue
from pyiceberg.schema import sanitize_column_names
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
)

from tidegate.crash import crash_point
from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError, UsageError
from tidegate.domain.model import Column, SourceFiles, WriteMode
from tidegate.engines.base import EVERY, Capabilities, CommitMarker, Fence, Target
from tidegate.engines.duckdb import FILE_ACCESS_HINT, DuckDBEngine, duckdb_column
from tidegate.engines.iceberg_tables import (
    MODEL_PROPERTY,
    IcebergTables,
    WrittenFiles,
    local_path,
    publish_folder,
    refuse_incomplete,
    tables_folder,
)
from tidegate.engines.iceberg_types import TIME_TRANSFORMS, conform, duckdb_type
from tidegate.sql import iceberg as iceberg_sql
from tidegate.sql import statements as sql


class DuckDBIcebergEngine(DuckDBEngine):
    capabilities = Capabilities(
        transactional_publish=True, single_writer_process=True, restores=True, writes_ahead=True
    )

    def __init__(
        self,
        path: Path,
        tables: IcebergTables,
        wait: bool = False,
        on_wait: Any = None,
        read_only: bool = False,
        files: Mapping[str, SourceFiles] | None = None,
        sources: Mapping[str, str] | None = None,
    ) -> None:
        self.tables = tables
        # the Iceberg sources (source name: NAMESPACE.TABLE), loaded before the connection
        # opens: their folders are among the ones its SQL may read
        self._sources = dict(sources or {})
        try:
            self._source_tables = {
                name: tables.load_named(identifier) for name, identifier in self._sources.items()
            }
        except BaseException:
            tables.close()
            raise
        super().__init__(path, wait=wait, on_wait=on_wait, read_only=read_only, files=files)
        self._read_only = read_only
        self._owns_tables = True
        self._copies: dict[tuple[str, str], str] | None = None
        # per staging table, the files written ahead of its publish (shared by the handles:
        # a worker writes them, the publisher commits them)
        self._ahead: dict[str, _Ahead] = {}
        if not read_only:
            # pyiceberg's Arrow writer takes about a second to import: a writer imports it
            # while its first batch computes, not when its first publish begins
            threading.Thread(target=_import_writer, daemon=True).start()
        try:
            self.keep_mirrors()
            self.keep_iceberg_sources()
        except BaseException:
            self.close()
            raise

    def _readable_folders(self) -> list[str]:
        local = tables_folder(self.tables.place.location)
        folders = [local] if local is not None else []
        for table in self._source_tables.values():
            folder = None if table is None else tables_folder(table.location())
            if folder is not None:
                folders.append(folder.rstrip("/") + "/")
        return folders

    # the Iceberg sources -------------------------------------------------------------------

    def keep_iceberg_sources(self) -> None:
        """Each Iceberg source's view, over the files of its table's main snapshot, made or
        remade when the table's metadata changed since the view was made (the view's comment
        names the metadata file); a table of that name is not replaced. A read-only handle makes
        a temporary view of its own instead, where the warehouse's is missing or outdated."""
        for name, identifier in sorted(self._sources.items()):
            table = self._source_tables.get(name)
            if table is None:
                raise UsageError(f"source {name}: the Iceberg catalog holds no table {identifier}")
            if tables_folder(table.location()) is None:
                raise UsageError(
                    f"source {name}: the files of {identifier} are at {table.location()}; "
                    "tidegate reads Iceberg sources whose files are local (a path or file://)"
                )
            label = iceberg_sql.source_label(identifier, table.metadata_location)
            found = self._run(sql.tables_named(), ["main", name]).fetchall()
            if any(tuple(row) != (True, "VIEW") for row in found):
                raise UsageError(
                    f"source {name}: the warehouse holds a table {name!r}; an Iceberg source is "
                    "a view tidegate keeps: rename the table or the source"
                )
            if found and self._one(sql.view_comment(), [name]) == (label,):
                continue
            try:
                snapshot = table.metadata.current_snapshot_id
                files = (
                    [] if snapshot is None else self.tables.data_files(table, snapshot, _EVERY_ROW)
                )
                statements = iceberg_sql.source_view(
                    sql.table(name), _columns_of(table), files, label, self._read_only
                )
                with self._transaction():
                    for statement in statements:
                        self._run(statement)
            except EngineError as error:
                message = str(error).replace(FILE_ACCESS_HINT, "")
                raise UsageError(
                    f"source {name}: cannot read Iceberg table {identifier}: {message}"
                ) from None

    def prepare(self) -> None:
        super().prepare()
        # a publish killed before its end left its branch; this process is the one writer
        self.tables.remove_leftover_branches()

    # the DuckDB copies ---------------------------------------------------------------------

    def keep_mirrors(self) -> None:
        """Each published Iceberg table has a copy in the DuckDB file, which models, checks,
        `diff` and `verify` read (DuckDB reads a table of its own much faster than hundreds of
        small files). A copy not made from the table's current metadata — the table changed
        behind tidegate's back, or a publish was killed between the two commits — is made
        again from main's files; the copy of a table gone from the catalog goes too. A read-only
        handle reads such a table's files through a temporary view of its own instead."""
        known = self._mirrors()
        present: set[tuple[str, str]] = set()
        for model_schema, name in self.tables.tables():
            table = self.tables.load(name, model_schema, fresh=True)
            if table is None or table.properties.get(MODEL_PROPERTY) != name:
                continue
            where = (model_schema or "main", name)
            present.add(where)
            if known.get(where) != table.metadata_location:
                self._copy(table, *where)
        if self._read_only:
            return
        for schema, name in sorted(set(known) - present):
            with self._transaction():
                self._run(sql.drop_table(sql.table(name, schema)))
                self._run(iceberg_sql.forget_mirror(), [schema, name])
            self._mirrors().pop((schema, name), None)

    def mirror_unchanged(self, schema: str | None, name: str, before: str) -> None:
        """Maintenance wrote a new metadata file of the table without moving main (branches
        removed, snapshots expired): a copy made from `before` holds main's rows still, and is
        recorded as made from the new one (not made again at the next open)."""
        where = (schema or "main", name)
        table = self.tables.load(name, schema, fresh=True)
        if table is None or self._read_only or self._mirrors().get(where) != before:
            return
        self._run(iceberg_sql.set_mirror(), [*where, table.metadata_location])

    def _mirrors(self) -> dict[tuple[str, str], str]:
        """Per copy, the metadata file it was made from: read once, then kept as this process
        (the one writer) makes copies."""
        if self._copies is None:
            rows = (
                []
                if super().table_columns("iceberg_mirrors", sql.META_SCHEMA) is None
                else self._run(iceberg_sql.select_mirrors()).fetchall()
            )
            self._copies = {(schema, name): location for schema, name, location in rows}
        return self._copies

    def _copy(self, table: Any, schema: str, name: str) -> None:
        """The table's copy made from main's files (a read-only handle: a temporary view)."""
        columns = _columns_of(table)
        snapshot = table.metadata.current_snapshot_id
        files = [] if snapshot is None else self.tables.data_files(table, snapshot, _EVERY_ROW)
        if self._read_only:
            self._run(iceberg_sql.files_view(sql.table(name), columns, files))
            return
        if schema != "main":
            self._run(sql.create_schema(schema))
        self._run(iceberg_sql.mirrors_ddl())
        with self._transaction():
            self._run(iceberg_sql.mirror_table(sql.table(name, schema), columns, files))
            self._run(iceberg_sql.set_mirror(), [schema, name, table.metadata_location])
        self._mirrors()[(schema, name)] = table.metadata_location
        self._published_columns.pop((None if schema == "main" else schema, name), None)

    def _mirror_window(
        self, target: Target, rows_of: str, bounds: Mapping[str, Any], table: Any
    ) -> None:
        """The copy given the window's new rows, and the state it now holds."""
        # the copy's own columns: the Iceberg table's were evolved already
        own = super().table_columns(target.name, target.schema)
        if own is None:
            self._copy(table, target.schema or "main", target.name)
            return
        self._published_columns[(target.schema, target.name)] = own
        whole = replace(target, write_mode=WriteMode.OVERWRITE, unique_key=())
        super().publish(whole, rows_of, bounds, [])
        schema = target.schema or "main"
        self._run(iceberg_sql.set_mirror(), [schema, target.name, table.metadata_location])
        self._mirrors()[(schema, target.name)] = table.metadata_location

    def table_columns(self, name: str, schema: str | None = None) -> list[Column] | None:
        table = self.tables.load(name, schema)
        if table is None or table.properties.get(MODEL_PROPERTY) != name:
            if (schema or "main", name) in self._mirrors():
                return None  # a copy of a table gone from the catalog
            return super().table_columns(name, schema)
        return [
            duckdb_column(f.name, duckdb_type(f.field_type), not f.required)
            for f in table.schema().fields
        ]

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
            raise EngineError("duckdb: this warehouse was opened read-only")
        if target.cursor:
            raise EngineError("iceberg: cursor models publish into DuckDB tables only")
        refuse_incomplete(markers)
        if fence is not None:
            # the fences live in the DuckDB file, whose one writing process this is
            with self._transaction():
                self._hold_fence(fence)
        if target.write_mode is WriteMode.APPEND and not target.unique_key:
            self.tables.refuse_republished(target.name, target.schema, markers)
        rows_of = staging
        content: dict[int, Checksum] = {}
        if target.write_mode is not WriteMode.OVERWRITE:
            rows_of = self._window_written(target, staging, bounds)
            if markers:
                content = self._content(target, bounds, markers, of=sql.staged(rows_of))
                markers = [replace(m, checksum=str(content[m.partition_start])) for m in markers]
        table = self.tables.load(target.name, target.schema)
        created = table is None
        ahead = self._ahead.pop(staging, None)
        written: WrittenFiles | None = None
        try:
            if (
                ahead is not None
                and rows_of == staging
                and table is not None
                and ahead.fits(table.metadata, markers)
            ):
                rows: Any = ahead.files
                expected = ahead.expected
            else:
                if ahead is not None:  # written for the table as it was: never committed
                    shutil.rmtree(ahead.files.folder, ignore_errors=True)
                arrow = self._window_rows(target, rows_of)
                table = self._table_for(target, arrow.schema, markers)
                rows, expected = self._written(table.metadata, target, rows_of, arrow, markers)
            if isinstance(rows, WrittenFiles):
                written = rows

            def audit(files: list[str]) -> None:
                self._audit_branch(target, table, files, bounds, markers, expected)

            copied = self._mirrors().get((target.schema or "main", target.name))
            published = self.tables.publish(
                table,
                rows,
                target.partition_column,
                bounds,
                markers,
                audit,
                written=lambda: crash_point("iceberg_branch_written"),
            )
        except BaseException:
            if written is not None:
                self.tables.discard_unpublished(target.name, target.schema, written.folder)
            if created:  # a failed first publish leaves no table behind
                self.tables.drop(target.name, target.schema)
            raise
        else:
            # the copy follows; a kill before it leaves a copy that the next open makes again
            if copied == published.began_at and not published.moved:
                self._mirror_window(target, rows_of, bounds, table)
            else:
                self._copy(table, target.schema or "main", target.name)
        finally:
            if rows_of != staging:
                self._run(self._drop_statement(rows_of))
        with contextlib.suppress(EngineError):
            self.drop_staging(staging)
        return content

    def write_ahead(
        self,
        target: Target,
        staging: str,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
    ) -> None:
        """An overwrite's files written on the worker that staged its rows, for the table as
        it is now (its publish, one at a time, then only commits them if the table still is);
        nothing written where the publish must first create the table or give it columns, or
        when writing fails (the publish writes them again and says what failed)."""
        table = self.tables.loaded(target.name, target.schema)
        if (
            self._read_only
            or table is None
            or target.cursor
            or target.write_mode is not WriteMode.OVERWRITE
            or not markers
        ):
            return
        metadata = table.metadata  # one state of it: the publisher may commit meanwhile
        known = {f.name for f in metadata.schema().fields}
        if any(c.name not in known for c in target.columns):
            return
        try:
            arrow = self._window_rows(target, staging)
            files, expected = self._written(metadata, target, staging, arrow, markers)
        except EngineError:
            return
        if isinstance(files, WrittenFiles):
            starts = tuple(m.partition_start for m in markers)
            self._ahead[staging] = _Ahead(files, expected, _shape(metadata), starts)

    def _written(
        self,
        metadata: Any,
        target: Target,
        rows_of: str,
        arrow: Any,
        markers: Sequence[CommitMarker],
    ) -> tuple[Any, dict[int, Checksum]]:
        """The window's rows (`arrow`, read from `rows_of`) as the table of `metadata` takes
        them, written as its files where they can be (see _data_files), and the checksums per
        partition of the rows they must hold."""
        expected = self._checksums(rows_of, target, markers)
        rows = conform(arrow, metadata.schema(), target.name)
        return self._data_files(metadata, target, rows, markers, expected), expected

    def _window_rows(self, target: Target, rows_of: str) -> Any:
        """The rows to publish as a pyarrow.Table, in the partition column's order: each
        partition's rows are one slice."""
        select = iceberg_sql.select_columns(
            sql.staged(rows_of), [c.name for c in target.columns], target.partition_column or None
        )
        return self._fetch_arrow(select, {})

    def _data_files(
        self,
        metadata: Any,
        target: Target,
        rows: Any,
        markers: Sequence[CommitMarker],
        expected: Mapping[int, Checksum],
    ) -> Any:
        """The window's rows (conformed, in the partition column's order) written as Parquet
        files under the table's folder (of its `metadata`), one per partition of the table's
        spec, as pyiceberg's writer would write them: it would split the rows by partition with
        a filter each, and open each file again for its statistics. The rows as they are
        (pyiceberg writes them) where a file's partition could not be told from its
        statistics: a spec other than the markers' grain, a table that keeps no column
        statistics, a type or a column name whose Parquet form is not the table's own."""
        counts = _partition_rows(metadata, markers, expected, rows.num_rows)
        if counts is None or tables_folder(metadata.location) is None:
            return rows
        import pyarrow.parquet as pq

        codec = metadata.properties.get("write.parquet.compression-codec", "zstd")
        level = metadata.properties.get("write.parquet.compression-level")
        folder = publish_folder(metadata.location, markers)
        local = local_path(folder)
        Path(local).mkdir(parents=True)
        paths: list[str] = []
        footers: list[Any] = []
        offset = 0
        try:
            for count in counts:
                if count:
                    path = f"{folder}/{len(paths):05d}.parquet"
                    with pq.ParquetWriter(
                        local_path(path),
                        rows.schema,
                        compression="none" if codec == "uncompressed" else codec,
                        compression_level=None if level is None else int(level),
                    ) as writer:
                        writer.write_table(rows.slice(offset, count))
                    paths.append(path)
                    footers.append(writer.writer.metadata)
                offset += count
        except (OSError, ValueError) as error:
            shutil.rmtree(local, ignore_errors=True)
            label = ".".join(self.tables.identifier(target.name, target.schema))
            raise EngineError(
                f"iceberg: {label}: cannot write its files: {error}; nothing was published"
            ) from None
        return WrittenFiles(tuple(paths), tuple(footers), local)

    def _table_for(self, target: Target, arrow_schema: Any, markers: Sequence[CommitMarker]) -> Any:
        """The model's Iceberg table, created (partitioned by the grain) or given the target's
        new columns."""
        table = self.tables.load(target.name, target.schema)
        if table is None:
            grain = target.grain or (markers[0].grain if markers else None)
            if target.keyed:
                grain = "key"
            table = self.tables.create(
                target.name,
                target.schema,
                arrow_schema,
                [c.name for c in target.columns if not c.nullable],
                target.partition_column,
                grain,
                {MODEL_PROPERTY: target.name},
            )
        return self.tables.evolve(table, arrow_schema)

    def _window_written(self, target: Target, staging: str, bounds: Mapping[str, Any]) -> str:
        """For merge and append: a table of the window's rows as the write mode leaves them
        (the published rows, then the staged ones written into them by the same statements a
        DuckDB table takes)."""
        window = f"{staging}__window"
        table = self.tables.load(target.name, target.schema)
        published = _columns_of(table) if table is not None else []
        columns = [
            *published,
            *[(c.name, c.type) for c in target.columns if c.name not in dict(published)],
        ]
        files = []
        if table is not None and table.metadata.current_snapshot_id is not None:
            files = self.tables.data_files(table, table.metadata.current_snapshot_id, _EVERY_ROW)
        self._run(self._drop_statement(window))
        statement = iceberg_sql.window_of_files(
            sql.staged(window), columns, files, target.partition_column, target.keyed
        )
        self._run(statement, self._bind(bounds, statement))
        for statement in self._writes(target, staging, into=sql.staged(window)):
            self._run(statement, self._bind(bounds, statement))
        return window

    def _audit_branch(
        self,
        target: Target,
        table: Any,
        files: list[str],
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        expected: Mapping[int, Checksum],
    ) -> None:
        """The branch's files of the window hold exactly the rows written: their checksum per
        partition equals the one of the staged rows (for merge and append, of the window's new
        rows). A value the table stores differently would show here, before main moves."""
        audited = "tidegate_iceberg_audit"
        self._run(self._drop_statement(audited))
        statement = iceberg_sql.window_of_files(
            sql.staged(audited), _columns_of(table), files, target.partition_column, target.keyed
        )
        self._run(statement, self._bind(bounds, statement))
        try:
            found = self._checksums(audited, target, markers)
        finally:
            self._run(self._drop_statement(audited))
        for start in expected:
            if found[start] != expected[start]:
                raise EngineError(
                    f"iceberg: the files written for {target.name} do not hold the rows staged "
                    f"(partition starting {start}: {found[start]} in the files, "
                    f"{expected[start]} staged); nothing was published"
                )

    def _checksums(
        self, staging: str, target: Target, markers: Sequence[CommitMarker]
    ) -> dict[int, Checksum]:
        """Per marked partition, the checksum of a staging table's rows over the target's
        columns."""
        names = [c.name for c in target.columns]
        if len(markers) <= 1:  # one partition, or an unmarked publish (a shadow table's)
            start = markers[0].partition_start if markers else EVERY[0]
            return {start: self.checksum(staging, names)}
        profiles = self.profile(
            staging, True, target.partition_column, markers[0].grain, None, names
        )
        return {
            m.partition_start: (
                profiles[m.partition_start].checksum
                if m.partition_start in profiles
                else Checksum(0, 0)
            )
            for m in markers
        }

    # earlier publishes ---------------------------------------------------------------------

    def stage_restored(
        self, staging: str, target: Target, attempt_id: str, bounds: Mapping[str, Any]
    ) -> None:
        files = self.tables.attempt_files(
            target.name, target.schema, target.partition_column, attempt_id, bounds
        )
        self.drop_staging(staging)
        statement = iceberg_sql.window_of_files(
            sql.staged(staging),
            [(c.name, c.type) for c in target.columns],
            files,
            target.partition_column,
            target.keyed,
        )
        self._run(statement, self._bind(bounds, statement))
        self._staged_by[staging] = None

    # markers ---------------------------------------------------------------------------------

    def markers(self, attempt_ids: Sequence[str]) -> dict[str, CommitMarker]:
        # the `update` write mode keeps its markers in the DuckDB file: it updates DuckDB tables
        return {**super().markers(attempt_ids), **self.tables.markers(attempt_ids)}

    def markers_of(
        self, model: str, start: int = EVERY[0], end: int = EVERY[1]
    ) -> list[CommitMarker]:
        found = self.tables.markers_of(model, start, end)
        return found or super().markers_of(model, start, end)

    def drop_staging(self, staging: str | None = None) -> int:
        for name in list(self._ahead) if staging is None else [staging]:
            ahead = self._ahead.pop(name, None)
            if ahead is not None:  # written ahead of a publish that will not come
                shutil.rmtree(ahead.files.folder, ignore_errors=True)
        return super().drop_staging(staging)

    def handle(self) -> DuckDBIcebergEngine:
        twin = super().handle()
        if not isinstance(twin, DuckDBIcebergEngine):  # DuckDBEngine.handle makes its own type
            raise TypeError("a handle of another engine")
        twin.tables = self.tables
        twin._read_only = self._read_only
        twin._owns_tables = False
        twin._copies = self._mirrors()  # one writer: its handles share what it copied
        twin._ahead = self._ahead
        return twin

    def close(self) -> None:
        super().close()
        if self._owns_tables:
            self.tables.close()


_EVERY_ROW = AlwaysTrue()


@dataclass(frozen=True)
class _Ahead:
    """A window's files written before its publish, with the checksums of the staged rows per
    partition, for the table in the shape it had then."""

    files: WrittenFiles
    expected: dict[int, Checksum]
    shape: tuple[str, int, int]
    starts: tuple[int, ...]

    def fits(self, metadata: Any, markers: Sequence[CommitMarker]) -> bool:
        """Whether the publish of `markers` into the table of `metadata` can commit them."""
        return self.shape == _shape(metadata) and self.starts == tuple(
            m.partition_start for m in markers
        )


def _shape(metadata: Any) -> tuple[str, int, int]:
    """What files written for a table depend on: which table it is, its schema and its spec."""
    return (str(metadata.table_uuid), metadata.current_schema_id, metadata.default_spec_id)


def published_copies(warehouse: Path) -> bool:
    """Whether the DuckDB file records copies of published Iceberg tables (False when it cannot
    be read now: its writer holds it, and the open that follows says so)."""
    import duckdb

    if not warehouse.exists():
        return False
    try:
        con = duckdb.connect(str(warehouse), read_only=True)
    except duckdb.Error:
        return False
    try:
        (count,) = con.execute(iceberg_sql.count_mirrors()).fetchone() or (0,)
        return bool(count)
    except duckdb.CatalogException:
        return False  # no copy was ever made
    finally:
        con.close()


# the Iceberg types whose Parquet form, as pyarrow writes the table's Arrow schema, reads back
# as the same Iceberg type (add_files refuses a file otherwise)
_FILE_TYPES = (
    BooleanType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DecimalType,
    DateType,
    TimestampType,
    TimestamptzType,
    StringType,
    BinaryType,
)


def _partition_rows(
    metadata: Any, markers: Sequence[CommitMarker], expected: Mapping[int, Checksum], rows: int
) -> list[int] | None:
    """How many of the window's rows, in the partition column's order, each file takes: all in
    one file for an unpartitioned table or one key, else one slice per marked partition (the
    staged rows counted per partition, which must add up to all of them); None when the files
    could not be added as they are."""
    schema = metadata.schema()
    if any(not isinstance(f.field_type, _FILE_TYPES) for f in schema.fields):
        return None
    if sanitize_column_names(schema) != schema:
        return None  # pyiceberg's writer names such columns otherwise in the files
    if any(key.startswith("write.metadata.metrics") for key in metadata.properties):
        return None  # a file's partition is read from its column statistics
    spec = metadata.spec()
    if spec.is_unpartitioned():
        return [rows]
    if len(spec.fields) != 1 or not markers:
        return None
    transform = spec.fields[0].transform
    grains = {m.grain for m in markers}
    if isinstance(transform, IdentityTransform) and len(markers) == 1:
        return [rows]
    grain = grains.pop() if len(grains) == 1 else None
    if grain not in TIME_TRANSFORMS or not isinstance(transform, TIME_TRANSFORMS[grain]):
        return None
    counts = [expected[m.partition_start].rows for m in sorted(markers, key=_start)]
    return counts if sum(counts) == rows else None


def _start(marker: CommitMarker) -> int:
    return marker.partition_start


def _import_writer() -> None:
    importlib.import_module("pyiceberg.io.pyarrow")


def _columns_of(table: Any) -> list[tuple[str, str]]:
    return [(f.name, duckdb_type(f.field_type)) for f in table.schema().fields]
