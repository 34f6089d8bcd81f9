"""The reference workload on Spark equals DuckDB's, row for row (docs/design.md §2, §7).

The orders example — daily_revenue over January, then monthly_revenue and revenue_report for
January — is built, deployed and backfilled through the real CLI twice: on the embedded DuckDB
warehouse and on a Spark warehouse (local[2]) reading the same generated orders as Parquet.
The Spark tables are read as an outside reader does, through the catalog's pointers, and
compared with DuckDB's by their values (checksums are engine-specific).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.engines.spark_kit import LOCATION, published_files, published_rows, spark_project
from tests.kit import EXAMPLE_COLUMNS, example_project, tidegate, warehouse_rows

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

ROWS_PER_DAY = 8
BACKFILLS = (
    ("daily_revenue", "2025-01-01..2025-01-31"),
    ("monthly_revenue", "2025-01"),
    ("revenue_report", "2025-01"),
)
TABLES = EXAMPLE_COLUMNS


def backfill_everything(project: Path) -> dict[str, Any]:
    for model, partitions in BACKFILLS:
        result = tidegate(
            "backfill", model, "--partitions", partitions, "--batch-size", "16",
            "--project", project,
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
    status = tidegate("status", "--project", project, "--json")
    assert status.exit_code == 0, status.stderr
    return {m["model"]: m["partitions"]["published"] for m in status.json()["models"]}


def test_the_reference_workload_on_spark_equals_duckdb(tmp_path: Path) -> None:
    duck = example_project(tmp_path / "duck", rows_per_day=ROWS_PER_DAY)
    duck_counts = backfill_everything(duck)
    spark = spark_project(tmp_path / "spark", rows_per_day=ROWS_PER_DAY)
    spark_counts = backfill_everything(spark)
    assert (
        spark_counts
        == duck_counts
        == {
            "daily_revenue": 31,
            "monthly_revenue": 1,
            "revenue_report": 1,
        }
    )
    lake = spark / LOCATION
    for model, columns in TABLES.items():
        on_spark = published_rows(lake, model, columns)
        on_duckdb = [
            tuple(r) for r in warehouse_rows(duck, f"SELECT {columns} FROM {model} ORDER BY 1, 2")
        ]
        assert on_spark, model
        assert sorted(on_spark) == sorted(on_duckdb), model
    # one attempt directory per partition is current; nothing else is read
    assert len({Path(f).parent for f in published_files(lake, "daily_revenue")}) <= 31
    shown = tidegate("show", "partition", "revenue_report", "2025-01", "--project", spark)
    assert shown.exit_code == 0, shown.stderr
