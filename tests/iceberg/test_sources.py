"""A source that is an Iceberg table another tool writes: `[sources.orders] iceberg =
"raw.orders"`, a table of the warehouse's own Iceberg catalog. tidegate reads it through a view
named like the source over the files of main's snapshot, remade when the table changed: models
name it like a table, and a late row appended by the other tool is a changed input."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.iceberg.kit import iceberg_project, outside_catalog
from tests.kit import (
    assert_exactly_once,
    oracle_daily_revenue,
    published_daily_revenue,
    state_dump,
    tidegate,
    warehouse_execute,
    warehouse_rows,
)

TABLE_SOURCE = '[sources.orders]\ntable = "orders"\n'
ICEBERG_SOURCE = '[sources.orders]\niceberg = "raw.orders"\n'
DAYS = "2025-01-01..2025-01-07"
LATE_DAY = "2025-01-05"


def cli(project: Path, *args: str) -> str:
    result = tidegate(*args, "--project", project)
    assert result.exit_code == 0, (args, result.stdout[-1500:], result.stderr)
    return result.stdout


def to_iceberg(project: Path, location: Path | None = None) -> list[Any]:
    """Move the example's orders out of the DuckDB file into the Iceberg table raw.orders of
    the project's catalog (written by pyiceberg alone, as another tool would; its files under
    `location`, default the lake folder), and declare the source by it; returns what
    daily_revenue must hold."""
    oracle = oracle_daily_revenue(project)
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        rows = con.sql("SELECT * FROM orders ORDER BY order_id").to_arrow_table()
        con.execute("DROP TABLE orders")
    finally:
        con.close()
    (project / "lake").mkdir(exist_ok=True)
    with outside_catalog(project) as catalog:
        catalog.create_namespace("raw")
        table = catalog.create_table(
            "raw.orders",
            schema=rows.schema,
            location=None if location is None else location.resolve().as_uri(),
        )
        table.append(rows)
    config = project / "tidegate.toml"
    text = config.read_text()
    assert TABLE_SOURCE in text
    config.write_text(text.replace(TABLE_SOURCE, ICEBERG_SOURCE))
    return oracle


def append_late_order(project: Path, day: str, gross: Decimal) -> None:
    """One completed order of `day` appended to raw.orders by pyiceberg: a new snapshot."""
    with outside_catalog(project) as catalog:
        table = catalog.load_table("raw.orders")
        con = duckdb.connect()
        try:
            con.register("existing", table.scan(limit=1).to_arrow())
            late = con.sql(
                "SELECT * REPLACE (1000000 AS order_id, "
                f"TIMESTAMP '{day} 12:00:00' AS order_ts, 'completed' AS status, "
                f"CAST({gross} AS DECIMAL(12, 2)) AS gross_amount, "
                "CAST(0 AS DECIMAL(12, 2)) AS discount, CAST(0 AS DECIMAL(12, 2)) AS refund) "
                "FROM existing"
            ).to_arrow_table()
        finally:
            con.close()
        table.append(late.cast(table.schema().as_arrow()))


def test_an_iceberg_source_is_read_like_a_table_and_a_late_row_is_a_changed_input(
    tmp_path: Path,
) -> None:
    project = iceberg_project(tmp_path / "p", deploy=False)
    oracle = to_iceberg(project)
    cli(project, "build")
    cli(project, "deploy", "daily_revenue")
    done = tidegate(
        "backfill", "daily_revenue", "--partitions", DAYS, "--json", "--project", project
    )
    assert done.exit_code == 0, (done.stdout, done.stderr)
    run_id = done.json()["run_id"]
    week = [row for row in oracle if str(row[0]) <= "2025-01-07"]
    assert_exactly_once(published_daily_revenue(project), week)
    [(comment,)] = warehouse_rows(
        project, "SELECT comment FROM duckdb_views() WHERE view_name = 'orders'"
    )
    assert comment.startswith("tidegate iceberg source: raw.orders "), comment

    append_late_order(project, LATE_DAY, Decimal("777.00"))
    rerun = tidegate(
        "rerun",
        run_id,
        "--partitions",
        "2025-01-04..2025-01-06",
        "--approve",
        "a late order",
        "--json",
        "--project",
        project,
    )
    assert rerun.exit_code == 0, (rerun.stdout, rerun.stderr)
    proofs = {p["partition"]: p["deterministic"] for p in rerun.json()["proofs"]}
    # the late day's input changed (nothing to prove); the others came out the same
    assert proofs == {"2025-01-04": True, "2025-01-05": None, "2025-01-06": True}, proofs
    # the view follows the table's new snapshot, and the day holds the late order
    [(comment_after,)] = warehouse_rows(
        project, "SELECT comment FROM duckdb_views() WHERE view_name = 'orders'"
    )
    assert comment_after != comment
    late = {(d, s): g for d, s, _, g, _ in oracle if str(d) == LATE_DAY}
    [(gross,)] = warehouse_rows(
        project,
        "SELECT gross_revenue FROM daily_revenue "
        f"WHERE order_date = DATE '{LATE_DAY}' AND status = 'completed'",
    )
    assert gross == late[(next(d for d, _ in late), "completed")] + Decimal("777.00")
    assert_exactly_once(
        [r for r in published_daily_revenue(project) if str(r[0]) != LATE_DAY],
        [r for r in week if str(r[0]) != LATE_DAY],
    )


def test_a_table_whose_files_are_outside_the_lake_folder_is_read(tmp_path: Path) -> None:
    """The warehouse's connection may read the source table's folder besides the lake's."""
    project = iceberg_project(tmp_path / "p", deploy=False)
    elsewhere = tmp_path / "landing" / "orders"
    oracle = to_iceberg(project, location=elsewhere)
    cli(project, "build")
    cli(project, "deploy", "daily_revenue")
    cli(project, "backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-02")
    assert any(elsewhere.rglob("*.parquet"))
    two_days = [row for row in oracle if str(row[0]) <= "2025-01-02"]
    assert_exactly_once(published_daily_revenue(project), two_days)


def test_a_missing_iceberg_table_is_refused_in_one_line(tmp_path: Path) -> None:
    project = iceberg_project(tmp_path / "p", deploy=False)
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text().replace(TABLE_SOURCE, '[sources.orders]\niceberg = "raw.nowhere"\n')
    )
    warehouse_execute(project, "DROP TABLE orders")
    cli(project, "build")
    before = state_dump(project)
    # the first command that opens the warehouse: here the deploy's preflight
    result = tidegate("deploy", "daily_revenue", "--project", project)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    [line] = result.stderr.splitlines()
    assert line == "error: source orders: the Iceberg catalog holds no table raw.nowhere", line
    assert state_dump(project) == before


def test_a_table_of_the_same_name_is_not_replaced(tmp_path: Path) -> None:
    project = iceberg_project(tmp_path / "p", deploy=False)
    to_iceberg(project)
    warehouse_execute(project, "CREATE TABLE orders (order_ts TIMESTAMP)")
    cli(project, "build")
    result = tidegate("deploy", "daily_revenue", "--project", project)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    [line] = result.stderr.splitlines()
    assert "source orders: the warehouse holds a table 'orders'" in line, line


@pytest.mark.parametrize(
    "warehouse, section, message",
    [
        (False, 'iceberg = "raw.orders"\n', 'needs [warehouse] tables = "iceberg"'),
        (True, 'table = "orders"\niceberg = "raw.orders"\n', "iceberg (an Iceberg table) or table"),
        (True, 'path = "x.pq"\niceberg = "raw.orders"\n', "iceberg (an Iceberg table) or path"),
        (True, 'iceberg = "orders"\n', "is not NAMESPACE.TABLE"),
        (True, 'iceberg = "raw.or ders"\n', "is not NAMESPACE.TABLE"),
        (True, 'iceberg = "raw.orders"\nformat = "csv"\n', "format is for a file source"),
    ],
)
def test_bad_iceberg_sources_are_refused(
    tmp_path: Path, warehouse: bool, section: str, message: str
) -> None:
    project = iceberg_project(tmp_path / "p", deploy=False)
    config = project / "tidegate.toml"
    text = config.read_text().replace(TABLE_SOURCE, f"[sources.orders]\n{section}")
    if not warehouse:
        text = text.replace('tables = "iceberg"\nnamespace = "analytics"\n', "")
    config.write_text(text)
    result = tidegate("build", "--project", project)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    [line] = result.stderr.splitlines()
    assert message in line and "tidegate.toml" in line, line
