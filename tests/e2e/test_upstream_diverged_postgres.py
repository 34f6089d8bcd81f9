"""Inputs checked where they live, on a PostgreSQL warehouse with its ledger in PostgreSQL too:
the days of daily_revenue an older copy of the warehouse no longer holds, then the dropped
table, refuse the month and are marked in the shared ledger until republished."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines.postgres_kit import admin, fresh_database, postgres_project, rows
from tests.kit import EXAMPLE_MODELS
from tests.ops.test_upstream_in_warehouse import (
    JANUARY,
    JANUARY_DAYS,
    ORDERS_PER_DAY,
    cli,
    open_marks,
    published_month,
    refused_line,
)
from tidegate.domain.taint import MarkKind

pytestmark = pytest.mark.postgres

SQLITE_STATE = '[state]\npath = ".tidegate/state.db"\n'


def ledger_in(project: Path, dsn: str) -> None:
    config = project / "tidegate.toml"
    text = config.read_text()
    assert text.count(SQLITE_STATE) == 1
    config.write_text(text.replace(SQLITE_STATE, f'[state]\nurl = "{dsn}"\nschema = "ledger"\n'))


def january_orders(dsn: str) -> int:
    [(orders,)] = rows(
        dsn, "SELECT sum(order_count) FROM monthly_revenue WHERE month = DATE '2025-01-01'"
    )
    return int(orders)


def test_postgres_refuses_a_month_over_days_the_warehouse_lost(tmp_path: Path) -> None:
    with fresh_database() as dsn:
        project = postgres_project(tmp_path / "proj", dsn, deploy=False)
        ledger_in(project, dsn)
        cli(project, "build")
        for model in EXAMPLE_MODELS:
            cli(project, "deploy", model)
        cli(project, "backfill", "daily_revenue", "--partitions", JANUARY, "--batch-size", "31")
        # what restoring a dump taken after the tenth would leave: the later days' rows and
        # their markers gone
        with admin(dsn) as con:
            con.execute("DELETE FROM daily_revenue WHERE order_date >= DATE '2025-01-11'")
            con.execute(
                "DELETE FROM _tidegate.commit_markers WHERE model = 'daily_revenue' "
                "AND partition_start >= extract(epoch FROM TIMESTAMP '2025-01-11')"
            )

        refused = cli(project, "run", "monthly_revenue", "--partition", "2025-01", code=1)

        assert (
            "upstream missing: daily_revenue 2025-01-11: the warehouse holds no commit "
            "marker of its published attempt" in refused_line(refused)
        )
        assert published_month(project) is None
        assert open_marks(project) == [
            ("daily_revenue", d, MarkKind.MISSING) for d in JANUARY_DAYS[10:]
        ]

        cli(project, "backfill", "daily_revenue", "--partitions", "2025-01-11..2025-01-31")
        assert open_marks(project) == []
        cli(project, "run", "monthly_revenue", "--partition", "2025-01")
        assert january_orders(dsn) == len(JANUARY_DAYS) * ORDERS_PER_DAY

        with admin(dsn) as con:
            con.execute("DROP TABLE daily_revenue")
        refused = cli(project, "run", "monthly_revenue", "--partition", "2025-01", code=1)

        assert (
            "upstream missing: daily_revenue 2025-01-01: the table daily_revenue is not in "
            "the warehouse" in refused_line(refused)
        )
        assert open_marks(project) == [("daily_revenue", d, MarkKind.MISSING) for d in JANUARY_DAYS]
        # the month published before stays as it was
        assert january_orders(dsn) == len(JANUARY_DAYS) * ORDERS_PER_DAY
