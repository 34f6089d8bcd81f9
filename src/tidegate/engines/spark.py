"""Spark: models computed by Spark, published into Apache Iceberg tables (docs/engines/spark.md).

Models are written in the project dialect (DuckDB's) and transpiled with sqlglot; partition
bounds are bound by `spark.sql(text, args=...)`. Staged rows are cached temporary views of the
process's session, which no other process sees and a crash takes along. Published tables are
Iceberg tables of a SQL catalog, read through views over the files of main's snapshot; a
publish (spark_publish.py) goes through a branch of the attempt's own, so several processes and
machines publish side by side and a lost race publishes nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from pyiceberg.expressions import AlwaysTrue

from tidegate.domain.errors import EngineError, UsageError
from tidegate.domain.model import Column
from tidegate.engines.base import EVERY, Capabilities, CommitMarker, Target
from tidegate.engines.iceberg_tables import IcebergTables, named
from tidegate.engines.spark_fences import FencesPlace
from tidegate.engines.spark_layout import Layout
from tidegate.engines.spark_publish import SparkPublish, table_columns
from tidegate.engines.spark_session import SessionSettings, cancel_jobs, spark_session, tag_jobs
from tidegate.engines.spark_views import Views
from tidegate.engines.sql_queries import Params
from tidegate.sql import spark as spark_sql
from tidegate.sql import statements as sql
from tidegate.sql.model_sql import SqlProblem
from tidegate.sql.spark import SPARK

CANCEL_EVERY_SECONDS = 0.2
# The views of each warehouse (by location) in this process's one session.
_VIEWS: dict[str, Views] = {}


class _Fetched:
    """The collected rows of a statement, read like a DB-API cursor."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None


class SparkEngine(SparkPublish):
    name = "spark"
    # main moves by compare-and-swap of the catalog; processes may write side by side
    capabilities = Capabilities(
        transactional_publish=True, single_writer_process=False, restores=True
    )

    def __init__(
        self,
        session: SessionSettings,
        layout: Layout,
        fences: FencesPlace,
        tables: IcebergTables,
        read_only: bool = False,
        sources: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = session
        self.layout = layout
        self.place = fences
        self.tables = tables
        self._owns_tables = True
        # the Iceberg sources (source name: NAMESPACE.TABLE of the catalog)
        self._sources = dict(sources or {})
        # per table: the metadata file its view's files were read from, and them
        self._files: dict[tuple[str, str | None], tuple[str, list[Column], tuple[str, ...]]] = {}
        self._read_only = read_only
        try:
            self._fences = fences.open()
        except BaseException:
            tables.close()
            raise
        try:
            # a catalog in PostgreSQL may still hold the retired format's pointers
            self._fences.refuse_pointers(fences.label)
            for name, identifier in sorted(self._sources.items()):
                if tables.load_named(identifier) is None:
                    raise UsageError(
                        f"source {name}: the Iceberg catalog holds no table {identifier}"
                    )
            self._spark = spark_session(session)
        except BaseException:
            self._fences.close()
            tables.close()
            raise
        views = _VIEWS.get(layout.root)
        if views is None or views.session is not self._spark:
            views = _VIEWS[layout.root] = Views(self._spark, layout)
        views.forget_sources()
        self._views = views
        self._open()

    def _open(self) -> None:
        self._tag = f"tidegate-{id(self):x}"
        self._interrupted = False
        # set while no statement of this handle runs (what `interrupt` waits for)
        self._idle = threading.Event()
        self._idle.set()
        self._closed = False
        self._new_caches()

    # running statements --------------------------------------------------------------------

    def _frame(self, statement: str, params: Params | None = None) -> Any:
        """The DataFrame of a statement (run at once when it is a command), after the views of
        the tables it reads are brought up to date."""
        self._views.refresh(self._published, spark_sql.tables_read(statement))
        tag_jobs(self._spark, self._tag)
        try:
            return self._spark.sql(statement, args=params or None)
        except Exception as error:
            raise self._failure(error) from error

    def _run(self, statement: str, params: Params | None = None) -> _Fetched:
        with self._busy():
            frame = self._frame(statement, params)
            try:
                rows = frame.collect()
            except Exception as error:
                raise self._failure(error) from error
        return _Fetched([tuple(row) for row in rows])

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        """A statement of this handle runs (its jobs are what `interrupt` cancels)."""
        if self._interrupted:
            raise KeyboardInterrupt
        self._idle.clear()
        try:
            yield
        finally:
            self._idle.set()

    def _one(self, statement: str, params: Params | None = None) -> tuple[Any, ...]:
        row = self._run(statement, params).fetchone()
        if row is None:
            raise EngineError("spark: a statement that returns one row returned none")
        return row

    def _failure(self, error: Exception) -> BaseException:
        """A Spark error as tidegate's: KeyboardInterrupt after `interrupt`, else EngineError
        (a bug of tidegate's own passes through)."""
        if isinstance(error, (TypeError, AttributeError, NameError)):
            return error
        if self._interrupted:
            return KeyboardInterrupt()
        text = str(error).strip()
        return EngineError(f"spark: {text.splitlines()[0] if text else type(error).__name__}")

    def _bind(self, params: Mapping[str, Any], statement: str) -> Params:
        # only the markers the statement has; a bound instant is UTC (a naive one would be
        # read in the Python process's local zone)
        return {
            k: _utc(v) if isinstance(v, datetime) else v
            for k, v in params.items()
            if f":{k}" in statement
        }

    # the hooks of SqlQueries -----------------------------------------------------------------

    flavor = SPARK
    _staged = staticmethod(spark_sql.staged)
    _create_staging = staticmethod(spark_sql.cache_staging)

    def _published(
        self, name: str, schema: str | None
    ) -> tuple[list[Column], tuple[str, ...]] | None:
        """A published table's (or an Iceberg source's) columns and the data files of main's
        snapshot, read again only when the table's metadata changed."""
        source = self._sources.get(name) if schema is None else None
        identifier = self.tables.identifier(name, schema) if source is None else named(source)
        # a statement asks for each table it reads: the catalog is asked which metadata file
        # is current, and the table loaded only when that changed
        known = self._files.get((name, schema))
        if known is not None and known[0] == self.tables.metadata_location(identifier):
            return known[1], known[2]
        table = self._table(name, schema) if source is None else self.tables.load_named(source)
        if table is None:
            if source is not None:
                raise EngineError(f"source {name}: the Iceberg catalog holds no table {source}")
            return None
        columns = table_columns(table)
        snapshot = table.metadata.current_snapshot_id
        files = () if snapshot is None else tuple(self.tables.data_files(table, snapshot, _ALL))
        self._files[(name, schema)] = (table.metadata_location, columns, files)
        return columns, files

    def _all_columns(self, table: str, staged: bool = False) -> list[str]:
        source = spark_sql.staged(table) if staged else sql.table(table)
        return list(self._frame(spark_sql.select_all(source)).columns)

    def table_columns(self, name: str, schema: str | None = None) -> list[Column] | None:
        published = self._published(name, schema)
        if published is not None or schema is not None:
            return None if published is None else list(published[0])
        fields = self._views.source_fields(name)
        return None if fields is None else [_column(n, t, True) for n, t in fields]

    def staging_tables(self) -> list[str]:
        views = self._spark.catalog.listTables()
        prefix = spark_sql.STAGING_PREFIX
        return sorted(
            t.name.removeprefix(prefix)
            for t in views
            if t.isTemporary and t.name.startswith(prefix)
        )

    # the seam ----------------------------------------------------------------------------------

    def version(self) -> str:
        return str(self._spark.version)

    def frozen_while_open(self, table: str) -> bool:
        # other jobs may write the files under Spark's tables while tidegate reads them
        return False

    def prepare(self) -> None:
        """The catalog's tables are made when it opens; the location when first written."""

    def query_columns(self, sql_text: str, bounds: Mapping[str, Any]) -> list[Column]:
        statement = spark_sql.model_query(sql_text)
        frame = self._frame(statement, self._bind(bounds, statement))
        try:
            schema = frame.schema
        except Exception as error:
            raise self._failure(error) from error
        return [_column(f.name, f.dataType.simpleString(), True) for f in schema.fields]

    def staging_columns(self, staging: str, count_nulls: bool = True) -> list[Column]:
        source = spark_sql.staged(staging)
        fields = self._frame(spark_sql.select_all(source)).schema.fields
        names = [f.name for f in fields]
        if not names:
            return []
        if not count_nulls:
            return [_column(f.name, f.dataType.simpleString(), False) for f in fields]
        nulls = self._one(
            self._statement(
                ("nulls", staging, tuple(names)), lambda: sql.null_counts(source, names, SPARK)
            )
        )
        return [
            _column(f.name, f.dataType.simpleString(), bool(n))
            for f, n in zip(fields, nulls, strict=True)
        ]

    def stage_arrow(self, staging: str, data: Any) -> None:
        import pyarrow as pa

        rows = data if isinstance(data, pa.Table) else data.read_all()
        with self._busy():
            try:
                frame = self._spark.createDataFrame(rows)
            except Exception as error:
                raise self._failure(error) from error
        self._stage_frame(staging, frame)

    def _stage_frame(self, staging: str, frame: Any) -> None:
        """Stage a DataFrame's rows: cached at once, like a staged query's, so that they stay
        while the slot is staged."""
        view = spark_sql.STAGING_PREFIX + staging
        with self._busy():
            try:
                frame.createOrReplaceTempView(view)
                self._spark.catalog.cacheTable(view)
                frame.count()
            except Exception as error:
                with contextlib.suppress(Exception):
                    self._spark.catalog.dropTempView(view)
                raise self._failure(error) from error

    def _fetch_arrow(self, statement: str, params: Params) -> Any:
        with self._busy():
            frame = self._frame(statement, params)
            try:
                return frame.toArrow()
            except Exception as error:
                raise self._failure(error) from error

    def stage_restored(
        self, staging: str, target: Target, attempt_id: str, bounds: Mapping[str, Any]
    ) -> None:
        files = self.tables.attempt_files(
            target.name, target.schema, target.partition_column, attempt_id, bounds
        )
        self.drop_staging(staging)
        self._stage_frame(staging, self._views.frame(target.columns, files))

    def markers(self, attempt_ids: Sequence[str]) -> dict[str, CommitMarker]:
        return self.tables.markers(attempt_ids)

    def markers_of(
        self, model: str, start: int = EVERY[0], end: int = EVERY[1]
    ) -> list[CommitMarker]:
        return self.tables.markers_of(model, start, end)

    def handle(self) -> SparkEngine:
        """Another handle on the same warehouse for a worker thread: the process's session,
        its catalog, its own fences connection and its own job tag (what `interrupt`
        cancels)."""
        twin = SparkEngine.__new__(SparkEngine)
        twin.settings, twin.layout, twin.place = self.settings, self.layout, self.place
        twin.tables, twin._files, twin._owns_tables = self.tables, self._files, False
        twin._sources = self._sources
        twin._read_only = self._read_only
        twin._spark, twin._views = self._spark, self._views
        twin._fences = self.place.open()
        twin._open()
        return twin

    def share_cores(self, batches_in_flight: int) -> None:
        """Spark's scheduler shares its executors among the batches' jobs."""

    def interrupt(self) -> None:
        """Cancel the running statement's jobs, and the ones it starts until it gives up (a
        statement may start jobs one after another: a broadcast, then its join)."""
        self._interrupted = True
        threading.Thread(target=self._cancel_until_idle, daemon=True).start()

    def _cancel_until_idle(self) -> None:
        while True:
            cancel_jobs(self._spark, self._tag)
            if self._idle.wait(CANCEL_EVERY_SECONDS):
                return

    def close(self) -> None:
        # the session stays for the process's other handles; it ends with the process
        if not self._closed:
            self._closed = True
            self._fences.close()
            if self._owns_tables:
                self.tables.close()


_ALL = AlwaysTrue()


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def _column(name: str, spark_type: str, nullable: bool) -> Column:
    try:
        return Column(name, spark_sql.canonical_type(spark_type), nullable)
    except SqlProblem:
        raise EngineError(
            f"spark: column {name} has type {spark_type}, which tidegate cannot name; cast it"
        ) from None
