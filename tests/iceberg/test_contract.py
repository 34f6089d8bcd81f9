"""The Engine contract on DuckDB publishing into Iceberg tables, with the catalog in SQLite and
in PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines.contract import EngineContract
from tests.iceberg.kit import drop_namespace, iceberg_engine, postgres_place
from tidegate.engines.base import Engine


class TestIcebergSqliteCatalog(EngineContract):
    @pytest.fixture
    def engine(self, tmp_path: Path) -> Iterator[Engine]:
        opened = iceberg_engine(tmp_path)
        try:
            yield opened
        finally:
            opened.close()


@pytest.mark.postgres
class TestIcebergPostgresCatalog(EngineContract):
    @pytest.fixture
    def engine(self, tmp_path: Path) -> Iterator[Engine]:
        place = postgres_place(tmp_path)
        opened = iceberg_engine(tmp_path, place)
        try:
            yield opened
        finally:
            opened.close()
            drop_namespace(place)
