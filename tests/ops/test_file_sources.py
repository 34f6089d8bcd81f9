"""A source that is files: `[sources.orders] path = "data/orders/*.parquet"`. tidegate reads
the files through a view it keeps in the DuckDB warehouse, whose connection may read that
folder and no other: models name the source like a table, lineage and input fingerprints see
the files' rows, and a changed file is a changed input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

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
JANUARY = "2025-01-01..2025-01-31"


def to_files(project: Path, declared: str = "data/orders/*.parquet") -> list[Any]:
    """Move the orders table out of the warehouse into one Parquet file per month, and
    declare the source by path; returns what daily_revenue must hold."""
    oracle = oracle_daily_revenue(project)
    folder = project / "data" / "orders"
    folder.mkdir(parents=True)
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        for month in range(1, 13):
            con.execute(
                "COPY (SELECT * FROM orders WHERE month(order_ts) = ?) TO "
                f"'{folder}/2025-{month:02d}.parquet'",
                [month],
            )
        con.execute("DROP TABLE orders")
    finally:
        con.close()
    config = project / "tidegate.toml"
    text = config.read_text()
    assert TABLE_SOURCE in text
    config.write_text(text.replace(TABLE_SOURCE, f'[sources.orders]\npath = "{declared}"\n'))
    return oracle


def cli(project: Path, *args: str) -> str:
    result = tidegate(*args, "--project", project)
    assert result.exit_code == 0, (args, result.stdout[-1500:], result.stderr)
    return result.stdout


def test_a_file_source_is_read_like_a_table(project: Path) -> None:
    oracle = to_files(project)
    for step in (("build",), ("deploy", "daily_revenue", "--force", "--reason", "files")):
        cli(project, *step)
    cli(project, "backfill", "daily_revenue", "--partitions", JANUARY, "--batch-size", "7")
    january = [row for row in oracle if str(row[0]) < "2025-02-01"]
    assert_exactly_once(published_daily_revenue(project), january)
    [(kind,)] = warehouse_rows(
        project, "SELECT table_type FROM information_schema.tables WHERE table_name = 'orders'"
    )
    assert kind == "VIEW"


def test_a_changed_file_is_a_changed_input(project: Path) -> None:
    to_files(project)
    cli(project, "build")
    cli(project, "deploy", "daily_revenue", "--force", "--reason", "files")
    done = tidegate(
        "backfill", "daily_revenue", "--partitions", JANUARY, "--json", "--project", project
    )
    assert done.exit_code == 0, done.stderr
    run_id = done.json()["run_id"]
    january = project / "data" / "orders" / "2025-01.parquet"
    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT * REPLACE (CASE WHEN CAST(order_ts AS DATE) = DATE '2025-01-05' "
        f"THEN gross_amount + 1000 ELSE gross_amount END AS gross_amount) "
        f"FROM '{january}') TO '{january}.new' (FORMAT PARQUET)"
    )
    con.close()
    Path(f"{january}.new").replace(january)
    rerun = tidegate(
        "rerun",
        run_id,
        "--partitions",
        "2025-01-04..2025-01-06",
        "--approve",
        "a file was corrected",
        "--json",
        "--project",
        project,
    )
    assert rerun.exit_code == 0, (rerun.stdout, rerun.stderr)
    proofs = {p["partition"]: p["deterministic"] for p in rerun.json()["proofs"]}
    # the corrected day's input changed (nothing to prove); the others came out the same
    assert proofs == {"2025-01-04": True, "2025-01-05": None, "2025-01-06": True}, proofs
    [(gross,)] = warehouse_rows(
        project,
        "SELECT sum(gross_revenue) FROM daily_revenue WHERE order_date = DATE '2025-01-05'",
    )
    [(expected,)] = warehouse_rows(
        project,
        f"SELECT sum(gross_amount) FROM '{january}' "
        "WHERE CAST(order_ts AS DATE) = DATE '2025-01-05'",
    )
    assert gross == expected


def test_a_table_of_the_same_name_is_not_replaced(project: Path) -> None:
    to_files(project)
    warehouse_execute(project, "CREATE TABLE orders (order_ts TIMESTAMP)")
    before = state_dump(project)
    result = tidegate("run", "daily_revenue", "--partition", "2025-01-02", "--project", project)
    assert result.exit_code == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert "source orders: the warehouse holds a table 'orders'" in line, line
    assert state_dump(project) == before


def test_a_path_matching_no_file_is_refused_in_one_line(project: Path) -> None:
    to_files(project, declared="data/elsewhere/*.parquet")
    result = tidegate("run", "daily_revenue", "--partition", "2025-01-02", "--project", project)
    assert result.exit_code == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("error: source orders: cannot read "), line
    assert "data/elsewhere/*.parquet" in line, line


def test_a_view_of_the_users_own_over_other_files_says_what_to_do(project: Path) -> None:
    """Before file sources, a DuckDB view over read_parquet was the way to read files; the
    warehouse's connection no longer reaches them, and the failure says so."""
    to_files(project)
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text().replace('path = "data/orders/*.parquet"', 'table = "orders_files"')
    )
    folder = project / "data" / "orders"
    warehouse_execute(
        project, f"CREATE VIEW orders_files AS SELECT * FROM read_parquet('{folder}/*.parquet')"
    )
    cli(project, "build")
    result = tidegate("run", "daily_revenue", "--partition", "2025-01-02", "--project", project)
    assert result.exit_code != 0
    assert "path = ..." in result.stdout + result.stderr, (result.stdout, result.stderr)


@pytest.mark.parametrize(
    "section, message",
    [
        ('table = "orders"\npath = "x.parquet"\n', "table (a warehouse table) or path (files)"),
        ('path = "orders.xlsx"\n', "cannot tell the files' format"),
        ('table = "orders"\nformat = "csv"\n', "format is for a file source"),
        ('path = "it\'s.parquet"\n', "quotes and line breaks are not allowed"),
    ],
)
def test_bad_file_sources_are_refused(project: Path, section: str, message: str) -> None:
    config = project / "tidegate.toml"
    config.write_text(config.read_text().replace(TABLE_SOURCE, f"[sources.orders]\n{section}"))
    result = tidegate("build", "--project", project)
    assert result.exit_code == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert message in line and "tidegate.toml" in line, line


def test_the_first_deploy_reads_the_files_before_any_writer_made_their_view(
    undeployed_project: Path,
) -> None:
    """A deploy's preflight opens the warehouse read-only: it reads the files through a view of
    its own for as long as it runs, and leaves the warehouse as it was."""
    to_files(undeployed_project)
    cli(undeployed_project, "build")
    cli(undeployed_project, "deploy", "daily_revenue")
    assert (
        warehouse_rows(
            undeployed_project,
            "SELECT * FROM information_schema.tables WHERE table_name = 'orders'",
        )
        == []
    )
    cli(undeployed_project, "run", "daily_revenue", "--partition", "2025-01-02")
    [(kind,)] = warehouse_rows(
        undeployed_project,
        "SELECT table_type FROM information_schema.tables WHERE table_name = 'orders'",
    )
    assert kind == "VIEW"
