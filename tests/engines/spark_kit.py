"""The Spark warehouse the `spark` tests use: the process's one SparkSession (local[2]), and a
warehouse location of its own per test. Without pyspark or Java the tests fail, never skip."""

from __future__ import annotations

from pathlib import Path

from tidegate.engines.spark import SparkEngine
from tidegate.engines.spark_catalog import catalog_place
from tidegate.engines.spark_layout import Layout
from tidegate.engines.spark_session import SessionSettings

LOCAL = SessionSettings("local[2]")


def open_spark(location: Path, settings: SessionSettings = LOCAL) -> SparkEngine:
    """A Spark engine on the warehouse at `location`, its catalog the default SQLite file."""
    layout = Layout(str(location))
    return SparkEngine(
        settings, layout, catalog_place(layout.root, layout.catalog_file(), None, None)
    )
