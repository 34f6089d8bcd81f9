"""The Engine contract on Spark (local[2]) publishing into Iceberg tables: Spark writes each
attempt's Parquet files, the catalog adds them on the attempt's branch, Spark audits them, main
moves. With the catalog in SQLite and in PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines.contract import EngineContract
from tests.iceberg.kit import drop_namespace, postgres_place, spark_iceberg_engine
from tidegate.engines.base import Engine

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


class TestSparkIcebergSqliteCatalog(EngineContract):
    @pytest.fixture
    def engine(self, tmp_path: Path) -> Iterator[Engine]:
        opened = spark_iceberg_engine(tmp_path)
        try:
            yield opened
        finally:
            opened.drop_staging()  # the session outlives the test: its staged views must not
            opened.close()

    def test_name_and_capabilities(self, engine: Engine) -> None:
        assert engine.name == "spark"
        assert engine.capabilities.transactional_publish
        assert not engine.capabilities.single_writer_process
        assert engine.capabilities.restores


@pytest.mark.postgres
class TestSparkIcebergPostgresCatalog(EngineContract):
    @pytest.fixture
    def engine(self, tmp_path: Path) -> Iterator[Engine]:
        place = postgres_place(tmp_path)
        opened = spark_iceberg_engine(tmp_path, place)
        try:
            yield opened
        finally:
            opened.drop_staging()
            opened.close()
            drop_namespace(place)
