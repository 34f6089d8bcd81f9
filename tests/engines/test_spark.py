"""Spark, a warehouse of Parquet directories: the Engine contract on local[2], plus what only it
has — publish by compare-and-swap of the catalog's pointers, where a lost race changes nothing.
All Spark tests share one JVM: one xdist group, one session per test process."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines.contract import (
    DAY1,
    DAY1_ROWS,
    EVENT_COLUMNS,
    EngineContract,
    Row,
    marker_for,
    select_rows,
)
from tests.engines.postgres_kit import fresh_database
from tests.engines.spark_kit import LOCAL, open_spark
from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError
from tidegate.engines.base import Engine, Target, bound_values
from tidegate.engines.spark import SparkEngine
from tidegate.engines.spark_catalog import catalog_place
from tidegate.engines.spark_layout import Layout

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

    def test_its_tables_are_never_frozen(self, ready: Engine) -> None:
        # other sessions or jobs may write them while tidegate reads: no read-ahead
        self.publish_rows(ready, DAY1_ROWS)
        assert not ready.frozen_while_open("events")


# --- publish by compare-and-swap ------------------------------------------------------------------


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[SparkEngine]:
    opened = open_spark(tmp_path / "lake")
    try:
        yield opened
    finally:
        opened.drop_staging()
        opened.close()


def publish(engine: SparkEngine, rows: list[Row], attempt_id: str) -> None:
    staging = f"race_{attempt_id}"
    engine.stage(staging, select_rows(rows), {})
    engine.publish(
        Target("events", EVENT_COLUMNS, "ts", False, grain="day"),
        staging,
        bound_values(DAY1),
        [marker_for(attempt_id, DAY1)],
    )


def current(engine: SparkEngine) -> Checksum:
    engine.stage("probe", 'SELECT * FROM "events"', {})
    try:
        return engine.checksum("probe", [c.name for c in EVENT_COLUMNS])
    finally:
        engine.drop_staging("probe")


def expected_content(engine: SparkEngine, rows: list[Row]) -> Checksum:
    engine.stage("expected", select_rows(rows), {})
    try:
        return engine.checksum("expected", [c.name for c in EVENT_COLUMNS])
    finally:
        engine.drop_staging("expected")


@pytest.mark.parametrize("first_publish", [False, True])
def test_a_lost_race_for_a_partition_switches_nothing(
    lake: SparkEngine, tmp_path: Path, first_publish: bool
) -> None:
    """Two writers read the same pointer of a partition (none yet, or the first publish's);
    the one that swaps second fails, and the partition holds exactly the winner's rows."""
    if not first_publish:
        publish(lake, DAY1_ROWS, "att-before")
    loser = lake.handle()
    try:
        seen = loser._catalog.pointers("events")
        winner_rows = [(7, "2025-01-01 07:00:00", "won", "7.00")]
        publish(lake, winner_rows, "att-winner")
        # the loser still believes what it read before the winner's swap
        loser._catalog.pointers = lambda *_: dict(seen)  # type: ignore[method-assign]
        with pytest.raises(EngineError, match="another writer"):
            publish(loser, [(8, "2025-01-01 08:00:00", "lost", "8.00")], "att-loser")
        assert current(lake) == expected_content(lake, winner_rows)
        assert set(lake.markers(["att-winner", "att-loser"])) == {"att-winner"}
        # the loser's directory is gone; the winner's is the one the pointer names
        [directory] = lake._catalog.pointers("events").values()
        assert "att-winner" in directory
        written = [p.name for p in (tmp_path / "lake" / "events").glob("publish-*")]
        assert not [name for name in written if "att-loser" in name]
    finally:
        loser.close()


def test_a_crashed_publish_leaves_only_garbage(lake: SparkEngine, tmp_path: Path) -> None:
    """A directory written but never switched to (a writer killed before its swap) is read by
    nobody: the table is what the pointers name."""
    publish(lake, DAY1_ROWS, "att-published")
    table = tmp_path / "lake" / "events"
    [partition] = table.glob("publish-*/tidegate_slot=*")
    shutil.copytree(partition, table / "publish-att-crashed-000000000000" / partition.name)
    assert current(lake) == expected_content(lake, DAY1_ROWS)


@pytest.mark.postgres
def test_a_catalog_in_postgresql_is_shared_by_writers(tmp_path: Path) -> None:
    """Two engines on one location with the catalog in PostgreSQL (as on two machines): what
    one publishes the other reads, and a stale writer loses its race there too."""
    with fresh_database() as dsn:
        layout = Layout(str(tmp_path / "lake"))
        place = catalog_place(layout.root, None, dsn, None)
        first, second = SparkEngine(LOCAL, layout, place), SparkEngine(LOCAL, layout, place)
        try:
            seen = second._catalog.pointers("events")
            publish(first, DAY1_ROWS, "att-first")
            assert current(second) == expected_content(second, DAY1_ROWS)
            assert set(second.markers(["att-first"])) == {"att-first"}
            second._catalog.pointers = lambda *_: dict(seen)  # type: ignore[method-assign]
            with pytest.raises(EngineError, match="another writer"):
                publish(second, [(8, "2025-01-01 08:00:00", "late", "8.00")], "att-second")
            assert current(first) == expected_content(first, DAY1_ROWS)
        finally:
            for engine in (first, second):
                engine.drop_staging()
                engine.close()


# --- cancellation ---------------------------------------------------------------------------------

# A statement that runs for hours (Spark SQL: a cross join of ranges of many small tasks, whose
# tasks notice a cancel at once), run below the seam
SLOW = "SELECT count(*) FROM range(0, 1000000, 1, 16) AS a CROSS JOIN range(0, 1000000, 1, 16) AS b"


def test_interrupt_cancels_the_running_statement(lake: SparkEngine) -> None:
    handle = lake.handle()
    try:
        # the statement is running by then (and interrupt cancels each job it starts later)
        timer = threading.Timer(3, handle.interrupt)
        timer.start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            handle._run(SLOW)
        assert time.monotonic() - began < 60
        timer.join()
    finally:
        handle.close()
