"""Inputs checked where they live, on a Spark warehouse, whose commit markers are kept in its
Iceberg tables' snapshots: an older copy of the catalog restored, then the table dropped from
it, refuse the month that reads daily_revenue and mark the days it no longer holds."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.engines.spark_kit import LOCATION, published_rows, spark_project
from tests.ops.test_upstream_in_warehouse import (
    JANUARY_DAYS,
    cli,
    open_marks,
    published_month,
    refused_line,
)
from tidegate.domain.taint import MarkKind
from tidegate.engines.iceberg_place import CATALOG_FILE

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

ROWS_PER_DAY = 4


def backfill_days(project: Path, days: str) -> None:
    cli(project, "backfill", "daily_revenue", "--partitions", days, "--batch-size", "31")


def test_spark_refuses_a_month_over_days_its_catalog_lost(tmp_path: Path) -> None:
    project = spark_project(tmp_path / "proj", rows_per_day=ROWS_PER_DAY)
    catalog = project / LOCATION / CATALOG_FILE
    backfill_days(project, "2025-01-01..2025-01-10")
    older = tmp_path / "older-catalog.sqlite"
    shutil.copy(catalog, older)
    backfill_days(project, "2025-01-11..2025-01-31")
    shutil.copy(older, catalog)

    refused = cli(project, "run", "monthly_revenue", "--partition", "2025-01", code=1)

    assert (
        "upstream missing: daily_revenue 2025-01-11: the warehouse holds no commit marker "
        "of its published attempt" in refused_line(refused)
    )
    assert published_month(project) is None
    assert open_marks(project) == [
        ("daily_revenue", d, MarkKind.MISSING) for d in JANUARY_DAYS[10:]
    ]

    backfill_days(project, "2025-01-11..2025-01-31")
    assert open_marks(project) == []
    cli(project, "run", "monthly_revenue", "--partition", "2025-01")
    [(orders,)] = published_rows(project / LOCATION, "monthly_revenue", "sum(order_count)")
    assert orders == len(JANUARY_DAYS) * ROWS_PER_DAY

    with sqlite3.connect(catalog) as con:
        con.execute("DELETE FROM iceberg_tables WHERE table_name = 'daily_revenue'")
    refused = cli(project, "run", "monthly_revenue", "--partition", "2025-01", code=1)

    assert (
        "upstream missing: daily_revenue 2025-01-01: the table daily_revenue is not in the "
        "warehouse" in refused_line(refused)
    )
    assert open_marks(project) == [("daily_revenue", d, MarkKind.MISSING) for d in JANUARY_DAYS]
