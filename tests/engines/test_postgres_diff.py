"""`tidegate diff`'s comparison queries on PostgreSQL: the very tests of the DuckDB engine
(test_diff_queries.py), run against a database of their own through the same seam."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.engines.postgres_kit import fresh_database
from tests.engines.test_diff_queries import (  # noqa: F401 - collected here, on PostgreSQL
    Warehouse,
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
from tidegate.engines.postgres import PostgresEngine
from tidegate.engines.postgres_connection import Warehouse as PostgresTarget

pytestmark = pytest.mark.postgres


@pytest.fixture
def warehouse() -> Iterator[Warehouse]:
    with fresh_database() as dsn:
        yield Warehouse(lambda read_only: PostgresEngine(PostgresTarget(dsn), read_only=read_only))
