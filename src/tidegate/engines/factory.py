"""Opening the project's warehouse engine; engine modules are imported only here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from tidegate.domain.errors import UsageError
from tidegate.domain.model import SourceFiles
from tidegate.engines.base import Engine, MarkerReader
from tidegate.project.loader import Project
from tidegate.terminal import echo

if TYPE_CHECKING:
    from tidegate.engines.duckdb import DuckDBEngine
    from tidegate.engines.iceberg_tables import IcebergTables, Place

POSTGRES_HINT = "the postgres engine needs psycopg: pip install 'tidegate[postgres]'"
SPARK_HINT = "the spark engine needs pyspark: pip install 'tidegate[spark]'"
ICEBERG_HINT = "tables = \"iceberg\" needs pyiceberg: pip install 'tidegate[iceberg]'"


SHARED_HINT = (
    "distributed runs need a warehouse that several processes write: "
    '[warehouse] engine = "postgres" (the embedded DuckDB file has one writer)'
)


def open_engine(
    project: Project, wait: bool, read_only: bool = False, lease_seconds: float | None = None
) -> Engine:
    """Open the warehouse (for writing unless `read_only`; with `lease_seconds`, shared with the
    other workers of distributed runs); raises BusyError when another writer holds it,
    UsageError when it cannot be reached or cannot be shared."""
    settings = project.settings.warehouse
    if lease_seconds is not None and not shares_writes(project):
        raise UsageError(SHARED_HINT)
    if settings.engine == "postgres":
        try:
            from tidegate.engines.postgres import PostgresEngine
            from tidegate.engines.postgres_connection import warehouse_of
        except ImportError as error:
            if error.name is None or not error.name.startswith("psycopg"):
                raise
            raise UsageError(POSTGRES_HINT) from None
        if settings.dsn is None:  # the configuration refuses it; for the type checker
            raise UsageError('warehouse: engine = "postgres" needs dsn')
        warehouse = warehouse_of(settings.dsn, settings.db_schema, settings.password_env)
        return PostgresEngine(
            warehouse,
            wait=wait,
            on_wait=tell,
            read_only=read_only,
            lease_seconds=lease_seconds,
        )
    if settings.engine == "spark":
        return _open_spark(project, read_only)
    files = {name: s.files for name, s in project.sources.items() if s.files is not None}
    if settings.tables == "iceberg":
        engine: DuckDBEngine = _open_iceberg(project, wait, read_only, files)
    else:
        from tidegate.engines.duckdb import DuckDBEngine

        engine = DuckDBEngine(
            project.warehouse_path, wait=wait, on_wait=tell, read_only=read_only, files=files
        )
    if files:
        try:
            engine.keep_file_sources(files, temporary=read_only)
        except BaseException:
            engine.close()
            raise
    return engine


def open_markers(project: Project) -> MarkerReader | None:
    """The warehouse's commit markers, read-only and as cheaply as they can be read: a Spark
    warehouse's Iceberg catalog without starting Spark. None when the warehouse was never
    written (no DuckDB file, no catalog file): it holds no marker. Raises BusyError when a writer
    holds the DuckDB file, UsageError when the warehouse cannot be reached."""
    settings = project.settings.warehouse
    if settings.engine == "duckdb" and not project.warehouse_path.exists():
        return None
    if settings.engine != "spark":
        return open_engine(project, wait=False, read_only=True)
    lake = _iceberg_place(project)
    if lake.catalog_file is not None and not lake.catalog_file.exists():
        return None
    return _iceberg_tables(lake, read_only=True, one_writer=False)


def shares_writes(project: Project) -> bool:
    """Whether several processes may write the project's warehouse at once (distributed runs)."""
    return project.settings.warehouse.engine != "duckdb"


def _open_spark(project: Project, read_only: bool) -> Engine:
    """Spark takes no writer lock (several processes may publish, each move of main a
    compare-and-swap of the catalog): `wait` has nothing to wait for."""
    try:
        from tidegate.engines.spark import SparkEngine
    except ImportError as error:
        if error.name is None or not error.name.startswith(("pyspark", "py4j")):
            raise
        raise UsageError(SPARK_HINT) from None
    from tidegate.engines.spark_settings import spark_warehouse

    session, layout, fences = spark_warehouse(project.root, project.settings.warehouse)
    tables = _iceberg_tables(_iceberg_place(project), read_only, one_writer=False)
    sources = {name: s.iceberg for name, s in project.sources.items() if s.iceberg is not None}
    return SparkEngine(session, layout, fences, tables, read_only=read_only, sources=sources)


def _iceberg_tables(place: Place, read_only: bool, one_writer: bool = True) -> IcebergTables:
    from tidegate.engines.iceberg_tables import IcebergTables

    return IcebergTables(place, read_only=read_only, one_writer=one_writer)


def _iceberg_place(project: Project) -> Place:
    """Where the project's Iceberg catalog is (UsageError without pyiceberg)."""
    try:
        from tidegate.engines.iceberg_place import iceberg_place
    except ImportError as error:
        if error.name is None or not error.name.startswith(("pyiceberg", "pyarrow", "sqlalchemy")):
            raise
        raise UsageError(ICEBERG_HINT) from None
    return iceberg_place(project.root, project.settings.warehouse)


def _open_iceberg(
    project: Project, wait: bool, read_only: bool, files: Mapping[str, SourceFiles]
) -> DuckDBEngine:
    place = _iceberg_place(project)
    from tidegate.engines.duckdb_iceberg import DuckDBIcebergEngine, published_copies

    missing = place.catalog_file
    if missing is not None and not missing.exists() and published_copies(project.warehouse_path):
        # a moved or unmounted lake must not become a new, empty catalog (opening the catalog
        # makes its file: asked before)
        raise UsageError(
            f"the Iceberg catalog {missing} is missing, and this warehouse published Iceberg "
            "tables into it: put the folder back, or point [warehouse] location at it"
        )
    tables = _iceberg_tables(place, read_only)
    sources = {name: s.iceberg for name, s in project.sources.items() if s.iceberg is not None}
    return DuckDBIcebergEngine(
        project.warehouse_path,
        tables,
        wait=wait,
        on_wait=tell,
        read_only=read_only,
        files=files,
        sources=sources,
    )


def open_iceberg_tables(project: Project) -> IcebergTables:
    """The project's Iceberg catalog alone, read-only, without the warehouse: what a read
    command asks of the tables' history. UsageError without `tables = "iceberg"` or pyiceberg."""
    if project.settings.warehouse.tables != "iceberg":
        raise UsageError('this needs Iceberg tables: [warehouse] tables = "iceberg"')
    place = _iceberg_place(project)
    if place.catalog_file is not None and not place.catalog_file.exists():
        raise UsageError(f"the Iceberg catalog {place.catalog_file} does not exist")
    return _iceberg_tables(place, read_only=True)


def warehouse_problems(project: Project) -> list[str]:
    """What stops the warehouse from being written, known without opening it: for an embedded
    file, that it is missing or not writable; a server tells when it is reached."""
    if project.settings.warehouse.engine != "duckdb":
        return []
    path = project.warehouse_path
    if not path.exists():
        return [f"warehouse {path} does not exist"]
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        return [f"warehouse {path} is not writable by this user"]
    return []


def tell(message: str) -> None:
    """A note for the user on stderr (waiting for a lock), never on stdout: --json stays clean."""
    echo(message, err=True)
