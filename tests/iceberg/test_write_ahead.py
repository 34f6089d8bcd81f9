"""Files written ahead of a publish (`AheadWriter`): a worker writes an overwrite's Parquet files
once its rows passed their audit; the publisher, one at a time, commits them only if the table
is still as they were written for, and whatever no publish committed is removed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from pyiceberg.expressions import AlwaysTrue

from tests.engines.contract import (
    DAY1,
    DAY1_ROWS,
    DAY2,
    DAY2_ROWS,
    EVENT_COLUMNS,
    TEXT,
    Row,
    marker_for,
    select_rows,
)
from tests.iceberg.kit import iceberg_engine
from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError
from tidegate.domain.model import Column, WriteMode
from tidegate.domain.partitions import PartitionKey
from tidegate.engines.base import CommitMarker, Target, bound_values
from tidegate.engines.duckdb_iceberg import DuckDBIcebergEngine

TARGET = Target("events", EVENT_COLUMNS, "ts", False, grain="day")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[DuckDBIcebergEngine]:
    opened = iceberg_engine(tmp_path)
    opened.prepare()
    try:
        yield opened
    finally:
        opened.close()


def data_folder(engine: DuckDBIcebergEngine) -> Path:
    return Path(engine.tables.place.location.removeprefix("file://")) / "default/events/data"


def folders_of(engine: DuckDBIcebergEngine, attempt_id: str) -> list[Path]:
    return sorted(data_folder(engine).glob(f"tidegate-{attempt_id}-*"))


def main_files(engine: DuckDBIcebergEngine) -> list[str]:
    table = engine.tables.load("events", fresh=True)
    assert table is not None and table.metadata.current_snapshot_id is not None
    return engine.tables.data_files(table, table.metadata.current_snapshot_id, AlwaysTrue())


def staged(
    engine: DuckDBIcebergEngine, name: str, rows: Sequence[Row], columns: Sequence[Column]
) -> str:
    engine.stage(name, select_rows(rows, columns), {})
    return name


def content(engine: DuckDBIcebergEngine, rows: Sequence[Row]) -> tuple[Checksum, Checksum]:
    """(the published table's checksum, the checksum of `rows`) over the event columns."""
    names = [c.name for c in EVENT_COLUMNS]
    staged(engine, "probe_rows", rows, EVENT_COLUMNS)
    engine.stage("probe_table", 'SELECT * FROM "events"', {})
    try:
        return engine.checksum("probe_table", names), engine.checksum("probe_rows", names)
    finally:
        engine.drop_staging("probe_rows")
        engine.drop_staging("probe_table")


def publish(
    engine: DuckDBIcebergEngine,
    staging: str,
    partition: PartitionKey,
    marker: CommitMarker,
    target: Target = TARGET,
) -> None:
    engine.publish(target, staging, bound_values(partition), [marker])


def test_the_files_written_ahead_on_a_worker_are_the_ones_published(
    engine: DuckDBIcebergEngine,
) -> None:
    publish(engine, staged(engine, "s1", DAY1_ROWS, EVENT_COLUMNS), DAY1, marker_for("a1", DAY1))
    worker = engine.handle()
    try:
        staging = staged(worker, "s2", DAY2_ROWS, EVENT_COLUMNS)
        marker = marker_for("a2", DAY2)
        worker.write_ahead(TARGET, staging, bound_values(DAY2), [marker])
        [written] = folders_of(engine, "a2")
        assert sorted(p.name for p in written.iterdir()) == ["00000.parquet"]
        publish(engine, staging, DAY2, marker)
    finally:
        worker.close()
    assert folders_of(engine, "a2") == [written]  # not written a second time
    day2 = [f for f in main_files(engine) if "tidegate-a2-" in f]
    assert day2 == [str(written / "00000.parquet")]
    found, expected = content(engine, [*DAY1_ROWS, *DAY2_ROWS])
    assert found == expected
    assert engine.markers(["a2"])["a2"].attempt_id == "a2"


def test_files_written_ahead_of_no_publish_go_with_the_staging_table(
    engine: DuckDBIcebergEngine,
) -> None:
    publish(engine, staged(engine, "s1", DAY1_ROWS, EVENT_COLUMNS), DAY1, marker_for("a1", DAY1))
    before = main_files(engine)
    staging = staged(engine, "s2", DAY2_ROWS, EVENT_COLUMNS)
    engine.write_ahead(TARGET, staging, bound_values(DAY2), [marker_for("a2", DAY2)])
    assert len(folders_of(engine, "a2")) == 1
    engine.drop_staging(staging)
    assert folders_of(engine, "a2") == []
    assert main_files(engine) == before


def test_a_table_changed_after_writing_ahead_gets_files_written_anew(
    engine: DuckDBIcebergEngine,
) -> None:
    """Another publish gave the table a column between the write and the publish: the files
    written for the narrower schema are removed, and the publish writes its own."""
    publish(engine, staged(engine, "s1", DAY1_ROWS, EVENT_COLUMNS), DAY1, marker_for("a1", DAY1))
    staging = staged(engine, "s2", DAY2_ROWS, EVENT_COLUMNS)
    marker = marker_for("a2", DAY2)
    engine.write_ahead(TARGET, staging, bound_values(DAY2), [marker])
    [ahead] = folders_of(engine, "a2")
    wider = (*EVENT_COLUMNS, Column("note", TEXT, True))
    day3 = PartitionKey(DAY2.grain, DAY2.end, DAY2.end + 86_400)
    noted = staged(engine, "s3", [(6, "2025-01-03 01:00:00", "a", "1.00", "new")], wider)
    publish(engine, noted, day3, marker_for("a3", day3), Target("events", wider, "ts", False))
    publish(engine, staging, DAY2, marker)
    assert not ahead.exists()
    [published] = folders_of(engine, "a2")
    assert any(f.startswith(str(published)) for f in main_files(engine))
    found, expected = content(
        engine, [*DAY1_ROWS, *DAY2_ROWS, (6, "2025-01-03 01:00:00", "a", "1.00")]
    )
    assert found == expected


def test_a_refused_publish_removes_the_files_written_ahead(engine: DuckDBIcebergEngine) -> None:
    publish(engine, staged(engine, "s1", DAY1_ROWS, EVENT_COLUMNS), DAY1, marker_for("a1", DAY1))
    before = main_files(engine)
    staging = staged(engine, "s2", DAY2_ROWS, EVENT_COLUMNS)
    again = marker_for("a1", DAY2)  # attempt a1 published already
    engine.write_ahead(TARGET, staging, bound_values(DAY2), [again])
    assert len(folders_of(engine, "a1")) == 2
    with pytest.raises(EngineError, match="published already"):
        publish(engine, staging, DAY2, again)
    assert len(folders_of(engine, "a1")) == 1
    assert main_files(engine) == before


def test_nothing_is_written_ahead_of_a_first_publish_or_a_merge(
    engine: DuckDBIcebergEngine,
) -> None:
    """A first publish creates the table (its schema decides the files); a merge's rows depend
    on what is published when it commits."""
    staging = staged(engine, "s1", DAY1_ROWS, EVENT_COLUMNS)
    engine.write_ahead(TARGET, staging, bound_values(DAY1), [marker_for("a1", DAY1)])
    assert not data_folder(engine).exists()
    publish(engine, staging, DAY1, marker_for("a1", DAY1))
    merge = Target(
        "events", EVENT_COLUMNS, "ts", False, write_mode=WriteMode.MERGE, unique_key=("id",)
    )
    staging = staged(engine, "s2", DAY2_ROWS, EVENT_COLUMNS)
    engine.write_ahead(merge, staging, bound_values(DAY2), [marker_for("a2", DAY2)])
    assert folders_of(engine, "a2") == []
