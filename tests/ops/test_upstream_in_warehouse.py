"""Inputs are checked where they live: a model reads an upstream partition only while the
warehouse still holds the table and the commit marker of the attempt the ledger says published
it. A dropped table or a warehouse restored from an older copy refuses the reader (exit 1, one
line saying what to do) and marks the upstream partitions missing or diverged in the ledger
until they are republished."""

from __future__ import annotations

import shutil
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from tests.kit import tidegate, warehouse_execute, warehouse_rows
from tidegate.domain.taint import MarkKind
from tidegate.project.config import read_project_file
from tidegate.state.factory import open_state

JANUARY = "2025-01-01..2025-01-31"
JANUARY_DAYS = [str(date(2025, 1, 1) + timedelta(days=n)) for n in range(31)]
ORDERS_PER_DAY = 20


def cli(project: Path, *args: str, code: int = 0) -> Any:
    result = tidegate(*args, "--project", project)
    assert result.exit_code == code, (args, result.stdout[-2000:], result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def open_marks(project: Path) -> list[tuple[str, str, MarkKind]]:
    """(model, day, kind) of every open mark in the ledger."""
    state = open_state(project, read_project_file(project).state)
    try:
        return sorted((t.mark.model, day(t.mark.start), t.kind) for t in state.open_taints())
    finally:
        state.close()


def day(start: int) -> str:
    return datetime.fromtimestamp(start, timezone.utc).date().isoformat()


def published_month(project: Path) -> Any:
    found = cli(project, "show", "partition", "monthly_revenue", "2025-01", "--json").json()
    return found["published"]


def monthly_orders(project: Path) -> int:
    [(orders,)] = warehouse_rows(
        project, "SELECT sum(order_count) FROM monthly_revenue WHERE month = DATE '2025-01-01'"
    )
    return int(orders)


def refused_line(result: Any) -> str:
    """The refusal: one line, after the warning of the writer that found the warehouse
    changed when it started (and marked what it lost)."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("warning: "), result.stderr
    return lines[1]


def test_a_dropped_upstream_table_refuses_the_month_and_marks_its_days_missing(
    project: Path,
) -> None:
    cli(project, "run", "daily_revenue", "--partition", JANUARY)
    warehouse_execute(project, "DROP TABLE daily_revenue")

    refused = cli(project, "run", "monthly_revenue", "--partition", "2025-01", code=1)

    line = refused_line(refused)
    assert (
        "upstream missing: daily_revenue 2025-01-01: the table daily_revenue is not in the "
        "warehouse" in line
    ), line
    assert f"tidegate backfill daily_revenue --partitions {JANUARY}" in line, line
    assert "tidegate verify daily_revenue" in line, line
    assert published_month(project) is None
    marks = open_marks(project)
    assert marks == [("daily_revenue", d, MarkKind.MISSING) for d in JANUARY_DAYS]

    # refused again: the days already carry their marks, none is marked twice
    again = cli(project, "run", "monthly_revenue", "--partition", "2025-01", code=1)
    assert open_marks(project) == marks
    assert "upstream missing: daily_revenue 2025-01-01" in again.stderr


def test_a_warehouse_restored_from_an_older_copy_refuses_the_month(project: Path) -> None:
    cli(project, "run", "daily_revenue", "--partition", "2025-01-01..2025-01-10")
    older = project.parent / "older.duckdb"
    shutil.copy(project / "warehouse.duckdb", older)
    cli(project, "run", "daily_revenue", "--partition", "2025-01-11..2025-01-31")
    shutil.copy(older, project / "warehouse.duckdb")

    refused = cli(project, "run", "monthly_revenue", "--partition", "2025-01", code=1)

    line = refused_line(refused)
    assert (
        "upstream missing: daily_revenue 2025-01-11: the warehouse holds no commit marker "
        "of its published attempt att-" in line
    ), line
    assert "(restored from an older copy?)" in line, line
    assert "tidegate backfill daily_revenue --partitions 2025-01-11..2025-01-31" in line, line
    assert published_month(project) is None
    assert open_marks(project) == [
        ("daily_revenue", d, MarkKind.MISSING) for d in JANUARY_DAYS[10:]
    ]

    # (e) republishing the upstream range whole clears the marks, and the month then runs
    cli(project, "backfill", "daily_revenue", "--partitions", "2025-01-11..2025-01-31")
    assert open_marks(project) == []
    cli(project, "run", "monthly_revenue", "--partition", "2025-01")
    assert monthly_orders(project) == len(JANUARY_DAYS) * ORDERS_PER_DAY


def test_a_republished_table_clears_the_missing_marks(project: Path) -> None:
    cli(project, "run", "daily_revenue", "--partition", JANUARY)
    warehouse_execute(project, "DROP TABLE daily_revenue")
    cli(project, "run", "monthly_revenue", "--partition", "2025-01", code=1)
    assert len(open_marks(project)) == len(JANUARY_DAYS)

    cli(project, "backfill", "daily_revenue", "--partitions", JANUARY, "--batch-size", "31")

    assert open_marks(project) == []
    cli(project, "run", "monthly_revenue", "--partition", "2025-01")
    assert monthly_orders(project) == len(JANUARY_DAYS) * ORDERS_PER_DAY
