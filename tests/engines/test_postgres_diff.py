"""`tidegate diff`'s comparison queries on PostgreSQL: the very tests of the DuckDB engine
(test_diff_queries.py), run against a database of their own through the same seam."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from tests.engines.contract import EVENT_COLUMNS, Row, select_rows
from tests.engines.postgres_kit import fresh_database
from tests.engines.test_diff_queries import (  # noqa: F401 - collected here, on PostgreSQL
    changed,
    test_a_numeric_tolerance_is_relative,
    test_columns_of_different_types_are_compared_as_text,
    test_identical_sides_have_no_differences,
    test_keys_only_left_only_right_and_changed_with_the_columns_that_changed,
    test_summaries_count_sum_and_count_nulls_per_partition,
    test_summaries_follow_the_window_and_an_all_null_sum_is_none,
    test_summaries_of_a_key_list_model_by_key_position,
    test_the_sample_is_the_first_keys_in_key_order,
    test_the_window_limits_the_comparison,
    two_days,
)
from tidegate.domain.model import Column
from tidegate.domain.partitions import PartitionKey
from tidegate.engines.base import Target, bound_values
from tidegate.engines.postgres import PostgresEngine
from tidegate.engines.postgres_connection import Warehouse

pytestmark = pytest.mark.postgres


class PostgresWarehouse:
    """The DuckDB suite's warehouse, on PostgreSQL: written by a writer that closes after each
    table, read by a read-only session."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
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
        engine = PostgresEngine(Warehouse(self.dsn))
        try:
            engine.prepare()
            staging = f"diff_{self._n}"
            engine.stage(staging, select_rows(rows, columns), {})
            target = Target(table, tuple(columns), partition_column, key is not None, schema)
            engine.publish(target, staging, bound_values(partition, key), [])
        finally:
            engine.close()

    def reader(self) -> PostgresEngine:
        return PostgresEngine(Warehouse(self.dsn), read_only=True)


@pytest.fixture
def warehouse() -> Iterator[PostgresWarehouse]:
    with fresh_database() as dsn:
        yield PostgresWarehouse(dsn)
