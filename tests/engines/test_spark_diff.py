"""`tidegate diff`'s comparison queries on Spark: the very tests of the DuckDB engine
(test_diff_queries.py), run against a warehouse location of their own through the same seam."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines.spark_kit import LOCAL, open_spark
from tests.engines.test_diff_queries import (  # noqa: F401 - collected here, on Spark
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

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


@pytest.fixture
def warehouse(tmp_path: Path) -> Iterator[Warehouse]:
    yield Warehouse(lambda read_only: open_spark(tmp_path / "lake", LOCAL, read_only))
