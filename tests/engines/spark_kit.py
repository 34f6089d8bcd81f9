"""The Spark warehouse the `spark` tests use: the process's one SparkSession (local[2]), a
warehouse location of its own per test (its Iceberg catalog a SQLite file in it, unless given),
and an outside reader of what main holds. Without pyspark or Java the tests fail, never skip."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import duckdb

from tests.kit import EXAMPLE_MODELS, example_project, tidegate
from tidegate.engines.iceberg_place import CATALOG_FILE, catalog_uri
from tidegate.engines.iceberg_tables import IcebergTables, Place
from tidegate.engines.spark import SparkEngine
from tidegate.engines.spark_fences import fences_place
from tidegate.engines.spark_layout import FENCES_FILE, Layout
from tidegate.engines.spark_load import load_example
from tidegate.engines.spark_session import SessionSettings

# TIDEGATE_TEST_SPARK_REMOTE: run through Spark Connect instead (test_spark_connect.py sets it
# to local[2], which makes PySpark start a local Connect server)
REMOTE = os.environ.get("TIDEGATE_TEST_SPARK_REMOTE")
# Spark SQL's own warehouse directory: not the directory the tests run in
OWN = {"spark.sql.warehouse.dir": str(Path(tempfile.gettempdir()) / "tidegate-spark-sql")}
LOCAL = SessionSettings(None, REMOTE) if REMOTE else SessionSettings("local[2]", conf=OWN)
LOCATION = "lake"


def lake_place(location: Path, namespace: str = "default") -> Place:
    """The default catalog of a Spark warehouse: a SQLite file in its folder."""
    lake = location.resolve()
    return Place(catalog_uri(lake, None, None), lake.as_uri(), namespace, lake / CATALOG_FILE)


def open_spark(
    location: Path,
    settings: SessionSettings = LOCAL,
    read_only: bool = False,
    place: Place | None = None,
    fences_dsn: str | None = None,
) -> SparkEngine:
    """A Spark engine on the warehouse at `location`: its Iceberg catalog `place` (default:
    the SQLite file in the folder), its fences beside it or in the `fences_dsn` database."""
    layout = Layout(str(location.resolve()))
    fences = fences_place(layout.root, location / FENCES_FILE, fences_dsn, None)
    tables = IcebergTables(place or lake_place(location), read_only, one_writer=False)
    return SparkEngine(settings, layout, fences, tables, read_only)


def spark_project(target: Path, rows_per_day: int = 20, seed: int = 1, more: str = "") -> Path:
    """The orders example on a Spark warehouse (`lake/` in the project): the same generated
    orders as the DuckDB example, as the Parquet source `lake/orders`, every model deployed.
    `more`: lines added to the `[warehouse]` section."""
    example_project(target, rows_per_day, seed, deploy=False)
    shutil.rmtree(target / ".tidegate", ignore_errors=True)
    for leftover in target.glob("warehouse.duckdb*"):
        leftover.unlink()
    config = target / "tidegate.toml"
    duckdb_section = 'engine = "duckdb"\npath = "warehouse.duckdb"\n'
    assert duckdb_section in config.read_text()
    config.write_text(
        config.read_text().replace(
            duckdb_section,
            f'engine = "spark"\nmaster = "local[2]"\nlocation = "{LOCATION}"\n{more}',
        )
    )
    assert load_example(target / LOCATION, rows_per_day, seed) == 365 * rows_per_day
    assert tidegate("build", "--project", target).exit_code == 0
    for model in EXAMPLE_MODELS:
        result = tidegate("deploy", model, "--project", target)
        assert result.exit_code == 0, result.stderr
    return target


def published_files(location: Path, table: str, namespace: str = "default") -> list[str]:
    """What an outside reader reads of a published table: the data files of main's snapshot,
    as pyiceberg alone lists them."""
    from pyiceberg.catalog.sql import SqlCatalog

    lake = location.resolve()
    catalog = SqlCatalog(
        "tidegate", uri=f"sqlite:///{lake / CATALOG_FILE}", warehouse=lake.as_uri()
    )
    try:
        found = catalog.load_table((namespace, table))
        return sorted(
            task.file.file_path.removeprefix("file://") for task in found.scan().plan_files()
        )
    finally:
        catalog.engine.dispose()


def published_rows(location: Path, table: str, columns: str) -> list[tuple[Any, ...]]:
    """A published table's rows read with DuckDB from its current files, ordered."""
    files = published_files(location, table)
    if not files:
        return []
    con = duckdb.connect()
    try:
        return con.execute(
            f"SELECT {columns} FROM read_parquet($files) ORDER BY {columns}", {"files": files}
        ).fetchall()
    finally:
        con.close()
