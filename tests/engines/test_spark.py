"""Spark publishing into Iceberg tables: the Engine contract on local[2], plus what only it has —
several processes publishing one table, where a lost race for a partition publishes nothing and
different partitions both land. All Spark tests share one JVM: one xdist group, one session per
test process."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.expressions import AlwaysTrue

from tests.engines.contract import (
    DAY1,
    DAY1_ROWS,
    EVENT_COLUMNS,
    EngineContract,
    Row,
    marker_for,
    select_rows,
)
from tests.engines.postgres_kit import SERVER, fresh_database
from tests.engines.spark_kit import open_spark
from tests.iceberg.kit import drop_namespace, postgres_place
from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError, UsageError
from tidegate.domain.partitions import Grain, PartitionKey, parse_partition
from tidegate.engines.base import Engine, Target, bound_values
from tidegate.engines.spark import SparkEngine

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
        assert engine.capabilities.restores
        assert engine.version().split(".")[0].isdigit()

    def test_its_tables_are_never_frozen(self, ready: Engine) -> None:
        # other sessions or jobs may write them while tidegate reads: no read-ahead
        self.publish_rows(ready, DAY1_ROWS)
        assert not ready.frozen_while_open("events")


# --- publish by compare-and-swap ------------------------------------------------------------------


DAY2 = parse_partition("2025-01-02", Grain.DAY)


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[SparkEngine]:
    opened = open_spark(tmp_path / "lake")
    try:
        yield opened
    finally:
        opened.drop_staging()
        opened.close()


def publish(
    engine: SparkEngine, rows: list[Row], attempt_id: str, day: PartitionKey = DAY1
) -> None:
    staging = f"race_{attempt_id}"
    engine.stage(staging, select_rows(rows), {})
    engine.publish(
        Target("events", EVENT_COLUMNS, "ts", False, grain="day"),
        staging,
        bound_values(day),
        [marker_for(attempt_id, day)],
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


def meanwhile(loser: SparkEngine, other: Callable[[], None]) -> None:
    """Make `other` publish while the loser audits its branch: after it forked from main,
    before it moves main (as another process would)."""
    audit = loser._audit

    def audited(*args: Any) -> None:
        other()
        audit(*args)

    loser._audit = audited  # type: ignore[method-assign]


WINNER_ROWS = [(7, "2025-01-01 07:00:00", "won", "7.00")]
LOSER_ROWS = [(8, "2025-01-01 08:00:00", "lost", "8.00")]


@pytest.mark.parametrize("first_publish", [False, True])
def test_a_lost_race_for_a_partition_publishes_nothing(
    lake: SparkEngine, tmp_path: Path, first_publish: bool
) -> None:
    """Two processes publish one partition (its first publish, or a later one); the one whose
    main moved meanwhile fails, and the partition holds exactly the winner's rows."""
    if not first_publish:
        publish(lake, DAY1_ROWS, "att-before")
    loser = open_spark(tmp_path / "lake")
    try:
        meanwhile(loser, lambda: publish(lake, WINNER_ROWS, "att-winner"))
        with pytest.raises(EngineError, match="published by another writer meanwhile"):
            publish(loser, LOSER_ROWS, "att-loser")
        assert current(lake) == expected_content(lake, WINNER_ROWS)
        assert set(lake.markers(["att-winner", "att-loser"])) == {"att-winner"}
        # the loser's files are gone, and so is its branch
        written = [p.name for p in (tmp_path / "lake").rglob("*att-loser*")]
        assert written == []
        assert list(lake.tables.load("events").refs()) == ["main"]
    finally:
        loser.drop_staging()
        loser.close()


def test_publishes_of_different_partitions_both_land(lake: SparkEngine, tmp_path: Path) -> None:
    other = open_spark(tmp_path / "lake")
    day2_rows = [(9, "2025-01-02 09:00:00", "second", "9.00")]
    try:
        publish(lake, DAY1_ROWS, "att-first")
        meanwhile(other, lambda: publish(lake, day2_rows, "att-day2", DAY2))
        publish(other, WINNER_ROWS, "att-day1-again")
        assert current(lake) == expected_content(lake, WINNER_ROWS + day2_rows)
        assert set(lake.markers(["att-day2", "att-day1-again"])) == {"att-day2", "att-day1-again"}
    finally:
        other.drop_staging()
        other.close()


def test_files_no_snapshot_references_are_read_by_nobody(lake: SparkEngine) -> None:
    """Files written but never committed (a writer killed before main moved) are never read:
    the table is what main's snapshot lists."""
    publish(lake, DAY1_ROWS, "att-published")
    written = lake.tables.data_files(lake.tables.load("events"), _main(lake), _EVERY)
    stray = Path(written[0]).with_name("part-crashed.parquet")
    shutil.copyfile(written[0], stray)
    assert current(lake) == expected_content(lake, DAY1_ROWS)


@pytest.mark.postgres
def test_a_catalog_in_postgresql_is_shared_by_writers(tmp_path: Path) -> None:
    """Two engines on one folder with the catalog and the fences in PostgreSQL (as on two
    machines): what one publishes the other reads, and a writer that loses its race publishes
    nothing there too."""
    place = postgres_place(tmp_path)
    first = open_spark(tmp_path / "lake", place=place, fences_dsn=SERVER)
    second = open_spark(tmp_path / "lake", place=place, fences_dsn=SERVER)
    try:
        publish(first, DAY1_ROWS, "att-first")
        assert current(second) == expected_content(second, DAY1_ROWS)
        assert set(second.markers(["att-first"])) == {"att-first"}
        meanwhile(second, lambda: publish(first, WINNER_ROWS, "att-winner"))
        with pytest.raises(EngineError, match="another writer"):
            publish(second, LOSER_ROWS, "att-second")
        assert current(first) == expected_content(first, WINNER_ROWS)
    finally:
        for engine in (first, second):
            engine.drop_staging()
            engine.close()
        drop_namespace(place)


def _main(engine: SparkEngine) -> int:
    table = engine.tables.load("events")
    assert table is not None and table.metadata.current_snapshot_id is not None
    return int(table.metadata.current_snapshot_id)


_EVERY = AlwaysTrue()


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


@pytest.mark.postgres
def test_a_postgresql_catalog_holding_the_retired_pointers_is_refused(tmp_path: Path) -> None:
    """The catalog database still holds pointers of this warehouse in Spark's retired format:
    the engine refuses to open, in one line saying how to move, before Spark starts."""
    import psycopg

    with fresh_database() as dsn:
        lake = tmp_path / "lake"
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(
                "CREATE TABLE tidegate_spark_pointers (warehouse TEXT, schema_name TEXT, "
                "table_name TEXT, slot TEXT, directory TEXT)"
            )
            con.execute(
                "INSERT INTO tidegate_spark_pointers VALUES (%s, '', 'events', '1', 'd')",
                [str(lake.resolve())],
            )
        with pytest.raises(UsageError, match="former pointer tables") as refused:
            open_spark(lake, fences_dsn=dsn)
        assert "backfill the models into it" in str(refused.value)
        assert "\n" not in str(refused.value)
