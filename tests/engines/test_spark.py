"""Spark, a warehouse of Parquet directories: the Engine contract on local[2], plus what only it
has — publish by compare-and-swap of the catalog's pointers, where a lost race changes nothing.
All Spark tests share one JVM: one xdist group, one session per test process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines.contract import EngineContract
from tests.engines.spark_kit import open_spark
from tidegate.engines.base import Engine

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


class TestSpark(EngineContract):
    @pytest.fixture
    def engine(self, tmp_path: Path) -> Iterator[Engine]:
        opened = open_spark(tmp_path / "lake")
        try:
            yield opened
        finally:
            # the session outlives the test: its staged views must not
            opened.drop_staging()
            opened.close()

    def test_name_and_capabilities(self, engine: Engine) -> None:
        assert engine.name == "spark"
        assert engine.capabilities.transactional_publish
        assert not engine.capabilities.single_writer_process
        assert engine.version().split(".")[0].isdigit()
