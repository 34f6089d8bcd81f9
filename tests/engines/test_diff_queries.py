"""The engine's comparison queries used by `tidegate diff`: per-partition summaries and key-level
differences, computed in the warehouse, on a warehouse opened read-only.

Tables are written through the seam (stage + publish), then the warehouse is reopened read-only.
Expected values are worked out by hand from the literal rows below.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.engines.contract import DAY1, DAY1_ROWS, DAY2, DAY2_ROWS, EVENT_COLUMNS, Row, select_rows
from tidegate.domain.model import Column
from tidegate.domain.partitions import Grain, PartitionKey, parse_range
from tidegate.engines.base import (
    Engine,
    KeyDifference,
    PartitionSummary,
    Relation,
    Target,
    bound_values,
)
from tidegate.engines.duckdb import DuckDBEngine
from tidegate.sql.model_sql import parse_type

TEXT = parse_type("VARCHAR")
BOTH_DAYS = parse_range("2025-01-01..2025-01-02", DAY1.grain)
WINDOW = (BOTH_DAYS.start, BOTH_DAYS.end)
KEY = [("id", "exact")]
VALUES = [("ts", "exact"), ("kind", "exact"), ("amount", "exact")]


def events(name: str, schema: str | None = None) -> Relation:
    return Relation(name, schema, "ts", "day")


class Warehouse:
    """Tables written through the seam by a writer that closes after each table, read by a
    read-only session: `open_engine(read_only)` opens the engine under test."""

    def __init__(self, open_engine: Callable[[bool], Engine]) -> None:
        self.open_engine = open_engine
        self._n = 0

    def write(
        self,
        table: str,
        rows: Sequence[Row],
        partition: PartitionKey,
        columns: Sequence[Column] = EVENT_COLUMNS,
        schema: str | None = None,
        partition_column: str = "ts",
        key: str | None = None,
    ) -> None:
        self._n += 1
        engine = self.open_engine(False)
        try:
            engine.prepare()
            staging = f"diff_{self._n}"
            engine.stage(staging, select_rows(rows, columns), {})
            target = Target(table, tuple(columns), partition_column, key is not None, schema)
            engine.publish(target, staging, bound_values(partition, key), [])
        finally:
            engine.close()

    def reader(self) -> Engine:
        return self.open_engine(True)


@pytest.fixture
def warehouse(tmp_path: Path) -> Warehouse:
    path = tmp_path / "warehouse.duckdb"
    return Warehouse(lambda read_only: DuckDBEngine(path, read_only=read_only))


@pytest.fixture
def two_days(warehouse: Warehouse) -> Iterator[Warehouse]:
    warehouse.write("events", DAY1_ROWS, DAY1)
    warehouse.write("events", DAY2_ROWS, DAY2)
    yield warehouse


# -- partition summaries ---------------------------------------------------------------------


def test_summaries_count_sum_and_count_nulls_per_partition(two_days: Warehouse) -> None:
    reader = two_days.reader()
    try:
        found = reader.partition_summaries(
            events("events"), ["id", "kind", "amount"], ["id", "amount"], None
        )
    finally:
        reader.close()
    assert found == {
        DAY1.start: PartitionSummary(
            3, {"id": "6", "amount": "3.75"}, {"id": 0, "kind": 1, "amount": 1}
        ),
        DAY2.start: PartitionSummary(
            2, {"id": "9", "amount": "6.90"}, {"id": 0, "kind": 0, "amount": 0}
        ),
    }


def test_summaries_follow_the_window_and_an_all_null_sum_is_none(warehouse: Warehouse) -> None:
    warehouse.write("events", DAY1_ROWS, DAY1)
    warehouse.write("events", [(7, "2025-01-02 01:00:00", "x", None)], DAY2)
    reader = warehouse.reader()
    try:
        found = reader.partition_summaries(
            events("events"), ["amount"], ["amount"], (DAY2.start, DAY2.end)
        )
    finally:
        reader.close()
    assert found == {DAY2.start: PartitionSummary(1, {"amount": None}, {"amount": 1})}


def test_summaries_of_a_key_list_model_by_key_position(warehouse: Warehouse) -> None:
    columns = (Column("region", TEXT, False), Column("n", "BIGINT", False))
    keys = ("eu", "us", "x'); DROP TABLE regions; --")
    for position, rows in enumerate([[("eu", 1), ("eu", 2)], [("us", 5)], [(keys[2], 7)]]):
        warehouse.write(
            "regions",
            rows,
            PartitionKey(Grain.KEY, position, position + 1),
            columns,
            partition_column="region",
            key=keys[position],
        )
    reader = warehouse.reader()
    try:
        relation = Relation("regions", None, "region", "key", keys)
        everything = reader.partition_summaries(relation, ["n"], ["n"], None)
        windowed = reader.partition_summaries(relation, ["n"], ["n"], (1, 3))
        # a key the model no longer declares belongs to no partition
        fewer = reader.partition_summaries(
            Relation("regions", None, "region", "key", keys[:2]), ["n"], ["n"], None
        )
    finally:
        reader.close()
    assert {k: (v.rows, v.sums["n"]) for k, v in everything.items()} == {
        0: (2, "3"),
        1: (1, "5"),
        2: (1, "7"),
    }
    assert set(windowed) == {1, 2}
    assert set(fewer) == {0, 1}


# -- key differences -------------------------------------------------------------------------


@pytest.fixture
def changed(two_days: Warehouse) -> Warehouse:
    """Right side: day 1 loses id 3, changes id 2's amount and id 1's kind to NULL, gains id 6;
    day 2 is identical."""
    right = [
        (1, "2025-01-01 00:00:00", None, "1.50"),
        (2, "2025-01-01 12:30:00", "b", "2.26"),
        (6, "2025-01-01 13:00:00", "z", "0.00"),
    ]
    two_days.write("events", right, DAY1, schema="_shadow")
    two_days.write("events", DAY2_ROWS, DAY2, schema="_shadow")
    return two_days


def differences(
    warehouse: Warehouse,
    values: Sequence[tuple[str, str]] = VALUES,
    tolerance: float = 0.0,
    right: Relation | None = None,
    sample: int = 5,
    window: tuple[int, int] = WINDOW,
) -> dict[int, dict[str, KeyDifference]]:
    reader = warehouse.reader()
    try:
        return reader.key_differences(
            events("events"),
            right or events("events", "_shadow"),
            KEY,
            values,
            window,
            tolerance,
            sample,
        )
    finally:
        reader.close()


def test_keys_only_left_only_right_and_changed_with_the_columns_that_changed(
    changed: Warehouse,
) -> None:
    assert differences(changed) == {
        DAY1.start: {
            "only_left": KeyDifference(1, (("3",),), {}),
            "only_right": KeyDifference(1, (("6",),), {}),
            "changed": KeyDifference(2, (("1",), ("2",)), {"kind": 1, "amount": 1}),
        }
    }


def test_identical_sides_have_no_differences(two_days: Warehouse) -> None:
    assert differences(two_days, right=events("events")) == {}


def test_the_window_limits_the_comparison(changed: Warehouse) -> None:
    assert differences(changed, window=(DAY2.start, DAY2.end)) == {}


def test_a_numeric_tolerance_is_relative(changed: Warehouse) -> None:
    """2.25 → 2.26 is a change of 0.44%: inside 1%, outside 0.1%. A NULL is never within."""
    numeric = [("ts", "exact"), ("kind", "exact"), ("amount", "numeric")]
    loose = differences(changed, numeric, tolerance=0.01)[DAY1.start]["changed"]
    assert loose == KeyDifference(1, (("1",),), {"kind": 1})
    tight = differences(changed, numeric, tolerance=0.001)[DAY1.start]["changed"]
    assert tight == KeyDifference(2, (("1",), ("2",)), {"kind": 1, "amount": 1})


def test_columns_of_different_types_are_compared_as_text(two_days: Warehouse) -> None:
    as_text = (*EVENT_COLUMNS[:3], Column("amount", TEXT, True))
    rows = [(1, "2025-01-01 00:00:00", "a", "1.50"), (2, "2025-01-01 12:30:00", "b", "2.250")]
    two_days.write("events", [*rows, DAY1_ROWS[2]], DAY1, as_text, schema="_text")
    values = [("ts", "exact"), ("kind", "exact"), ("amount", "text")]
    found = differences(
        two_days, values, right=events("events", "_text"), window=(DAY1.start, DAY1.end)
    )
    # '2.25' (DECIMAL as text) is not '2.250'; the DECIMAL 1.50 prints as '1.50'
    assert found == {DAY1.start: {"changed": KeyDifference(1, (("2",),), {"amount": 1})}}


def test_the_sample_is_the_first_keys_in_key_order(warehouse: Warehouse) -> None:
    ids = [100, 9, 10, 11, 2000, 12, 13]
    rows = [(i, "2025-01-01 00:00:00", "a", "1.00") for i in ids]
    warehouse.write("events", rows[:1], DAY1)
    warehouse.write("events", rows, DAY1, schema="_shadow")
    found = differences(warehouse, sample=3)
    assert found == {DAY1.start: {"only_right": KeyDifference(6, (("9",), ("10",), ("11",)), {})}}
