"""Workers check their inputs where they live too: a distributed backfill of the month after
daily_revenue's table was dropped from the shared PostgreSQL warehouse fails (exit 1), saying
what to do, and the days are marked missing in the shared ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.distributed.kit import Process, run_row, shared_project, worker
from tests.engines.postgres_kit import admin, fresh_database
from tests.faults.ledger import wait_until
from tests.ops.test_upstream_in_warehouse import (
    JANUARY,
    JANUARY_DAYS,
    cli,
    open_marks,
    published_month,
)
from tidegate.domain.taint import MarkKind

pytestmark = pytest.mark.postgres


def test_a_worker_refuses_a_month_whose_days_are_gone_from_the_warehouse(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with fresh_database() as dsn:
        project = shared_project(tmp_path / "shared", dsn, rows_per_day=4)
        cli(project, "backfill", "daily_revenue", "--partitions", JANUARY, "--batch-size", "31")
        with admin(dsn) as con:
            con.execute("DROP TABLE daily_revenue")
        boss = Process(
            logs, "coordinator", "backfill", "monthly_revenue", "--partitions", "2025-01",
            "--distributed", "--project", project,
        )  # fmt: skip
        wait_until("the run is queued", lambda: (run_row(dsn) or [None])[0], 60)
        assert worker(logs, "w1", project).wait() == 0

        assert boss.wait() == 1, boss.stderr()
        [line] = [x for x in boss.stderr().splitlines() if x.startswith("error:")]
        assert (
            "upstream missing: daily_revenue 2025-01-01..2025-01-31 (missing from the "
            "warehouse: the table daily_revenue is not in the warehouse)" in line
        ), line
        assert "tidegate backfill daily_revenue --partitions 2025-01-01..2025-01-31" in line
        assert published_month(project) is None
        assert open_marks(project) == [("daily_revenue", d, MarkKind.MISSING) for d in JANUARY_DAYS]
