"""The reference workload on PostgreSQL equals DuckDB's, row for row (docs/design.md §2, §7).

The orders example — daily_revenue, monthly_revenue and revenue_report over four months — is
built, deployed and backfilled through the real CLI twice: on the embedded DuckDB warehouse and
on a PostgreSQL warehouse holding the same generated orders. The published tables are compared
by their values (the checksums are engine-specific and are not compared across engines).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.engines.postgres_kit import fresh_database, postgres_project, rows
from tests.kit import EXAMPLE_COLUMNS, example_project, tidegate, warehouse_rows

pytestmark = pytest.mark.postgres

ROWS_PER_DAY = 40
BACKFILLS = (
    ("daily_revenue", "2025-01-01..2025-04-30"),
    ("monthly_revenue", "2025-01..2025-04"),
    ("revenue_report", "2025-01..2025-04"),
)
TABLES = EXAMPLE_COLUMNS


def backfill_everything(project: Path) -> dict[str, Any]:
    """Backfill the three models in order through the CLI; the published partitions per model."""
    for model, partitions in BACKFILLS:
        result = tidegate(
            "backfill",
            model,
            "--partitions",
            partitions,
            "--batch-size",
            "7",
            "--max-concurrency",
            "2",
            "--project",
            project,
        )
        assert result.exit_code == 0, result.stderr
    status = tidegate("status", "--project", project, "--json")
    assert status.exit_code == 0, status.stderr
    return {m["model"]: m["partitions"]["published"] for m in status.json()["models"]}


def published(read: Any, model: str) -> list[tuple[Any, ...]]:
    columns = TABLES[model]
    return [tuple(r) for r in read(f"SELECT {columns} FROM {model} ORDER BY {columns}")]


def test_the_reference_workload_on_postgres_equals_duckdb(tmp_path: Path) -> None:
    duck = example_project(tmp_path / "duck", rows_per_day=ROWS_PER_DAY)
    duck_counts = backfill_everything(duck)
    with fresh_database() as dsn:
        postgres = postgres_project(tmp_path / "postgres", dsn, rows_per_day=ROWS_PER_DAY)
        postgres_counts = backfill_everything(postgres)
        assert (
            postgres_counts
            == duck_counts
            == {
                "daily_revenue": 120,
                "monthly_revenue": 4,
                "revenue_report": 4,
            }
        )
        for model in TABLES:
            on_postgres = published(lambda q: rows(dsn, q), model)
            on_duckdb = published(lambda q: warehouse_rows(duck, q), model)
            assert on_postgres, model
            assert on_postgres == on_duckdb, model
        # the same source rows: the orders copied into PostgreSQL are DuckDB's
        order_sums = "SELECT count(*), sum(gross_amount), sum(discount), sum(refund) FROM orders"
        assert rows(dsn, order_sums) == warehouse_rows(duck, order_sums)
        # every partition reconciled and checked on PostgreSQL: no failure anywhere
        shown = tidegate("show", "partition", "revenue_report", "2025-04", "--project", postgres)
        assert shown.exit_code == 0, shown.stderr
        markers = rows(dsn, "SELECT model, count(*) FROM _tidegate.commit_markers GROUP BY 1")
        assert dict(markers) == duck_counts
        assert rows(
            dsn,
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_schema = '_tidegate_staging'",
        ) == [(0,)]
