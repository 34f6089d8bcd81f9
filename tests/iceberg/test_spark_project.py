"""A Spark project publishing into Iceberg tables, as a user runs it: January backfilled by
Spark, read by name from outside with pyiceberg alone and equal to an independent GROUP BY and
to the same backfill into DuckDB tables; `show partition` names the snapshot; a bad rerun
undone by `restore` from the files the first run wrote; `verify` clean after it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from tests.engines.spark_kit import LOCATION, spark_project
from tests.iceberg.kit import NAMESPACE, outside_catalog
from tests.iceberg.test_project import COLUMNS, assert_shows_its_snapshot, read_outside, texts
from tests.kit import cli, example_project, result_document, warehouse_rows

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

ROWS_PER_DAY = 8
JANUARY = "2025-01-01..2025-01-31"
ICEBERG = f'tables = "iceberg"\nnamespace = "{NAMESPACE}"\n'
ORACLE_ALL = """
SELECT CAST(order_ts AS DATE) AS order_date, status, count(*),
       CAST(sum(gross_amount) AS DECIMAL(18, 2)),
       CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2))
FROM read_parquet($files) GROUP BY 1, 2
"""
ORACLE = """
SELECT CAST(order_ts AS DATE) AS order_date, status, count(*),
       CAST(sum(gross_amount) AS DECIMAL(18, 2)),
       CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2))
FROM read_parquet($files) WHERE order_ts >= '2025-01-01' AND order_ts < '2025-02-01'
GROUP BY 1, 2
"""


def orders_files(project: Path) -> list[str]:
    return sorted(str(f) for f in (project / LOCATION / "orders").glob("*.parquet"))


def oracle_rows(project: Path, days: set[date]) -> list[tuple[Any, ...]]:
    """The independent GROUP BY over the source's Parquet files, for these days, as
    (order_date, status, count, gross, net) sorted."""
    rows = duckdb.connect().execute(ORACLE_ALL, {"files": orders_files(project)}).fetchall()
    return sorted(tuple(row) for row in rows if row[0] in days)


@pytest.fixture(scope="module")
def january(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The reference project on Spark + Iceberg with January of daily_revenue backfilled."""
    project = spark_project(
        tmp_path_factory.mktemp("spark-iceberg") / "p", rows_per_day=ROWS_PER_DAY, more=ICEBERG
    )
    cli(project, "backfill", "daily_revenue", "--partitions", JANUARY, "--batch-size", "16")
    yield project


def test_january_reads_by_name_from_outside_and_equals_a_group_by(january: Path) -> None:
    outside = read_outside(january)
    assert len(outside) > 31
    oracle = duckdb.connect().execute(ORACLE, {"files": orders_files(january)}).fetchall()
    assert outside == texts(oracle)
    assert "clean" in cli(january, "verify", "--checksums", "daily_revenue").stdout
    # the pointer catalog of Spark's own tables is not made
    assert not (january / LOCATION / "_tidegate" / "catalog.sqlite").exists()


def test_january_equals_the_same_backfill_into_duckdb_tables(january: Path, tmp_path: Path) -> None:
    plain = example_project(tmp_path / "plain", rows_per_day=ROWS_PER_DAY)
    cli(plain, "backfill", "daily_revenue", "--partitions", JANUARY, "--batch-size", "16")
    query = "SELECT " + ", ".join(COLUMNS) + " FROM daily_revenue"
    assert read_outside(january) == texts([tuple(r) for r in warehouse_rows(plain, query)])


def test_show_partition_names_the_snapshot_that_holds_it(january: Path) -> None:
    assert_shows_its_snapshot(january, "2025-01-05")


def test_restore_undoes_a_bad_rerun_from_the_files_spark_wrote(tmp_path: Path) -> None:
    project = spark_project(tmp_path / "p", rows_per_day=ROWS_PER_DAY, more=ICEBERG)
    days = "2025-01-01..2025-01-03"
    first = result_document(project, "backfill", "daily_revenue", "--partitions", days)
    good = read_outside(project)
    # a load doubled the orders: a second file of the same rows in the source's folder
    [source] = orders_files(project)
    doubled_file = Path(source).with_name("part-00001.parquet")
    duckdb.connect().execute(
        f"COPY (SELECT order_id + 1000000 AS order_id, * EXCLUDE (order_id) "
        f"FROM read_parquet('{source}')) TO '{doubled_file}' (FORMAT PARQUET)"
    )
    cli(project, "rerun", "daily_revenue", "--partitions", days)
    doubled = read_outside(project)
    assert doubled != good

    restored = result_document(
        project, "restore", "daily_revenue", "--partitions", "2025-01-02",
        "--to", first["run_id"],
    )  # fmt: skip
    assert restored["status"] == "succeeded"
    assert [p["deterministic"] for p in restored["proofs"]] == [True]
    now = read_outside(project)
    assert [r for r in now if r[0] == "2025-01-02"] == [r for r in good if r[0] == "2025-01-02"]
    assert [r for r in now if r[0] != "2025-01-02"] == [r for r in doubled if r[0] != "2025-01-02"]
    assert "clean" in cli(project, "verify", "--checksums", "daily_revenue").stdout


def test_an_iceberg_source_another_tool_writes_is_read_by_spark(tmp_path: Path) -> None:
    """`[sources.orders] iceberg = "raw.orders"` on Spark: the orders as an Iceberg table of
    the catalog, written by pyiceberg alone; Spark reads main's files, and a late row the other
    tool appends is read by the next command."""
    import pyarrow.parquet as pq

    project = spark_project(tmp_path / "p", rows_per_day=ROWS_PER_DAY, more=ICEBERG)
    days = days_between(date(2025, 1, 1), date(2025, 1, 3))
    expected = oracle_rows(project, days)
    orders = pq.read_table(orders_files(project)[0])
    shutil.rmtree(project / LOCATION / "orders")
    with outside_catalog(project) as catalog:
        catalog.create_namespace("raw")
        catalog.create_table("raw.orders", schema=orders.schema).append(orders)
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text().replace(
            '[sources.orders]\ntable = "orders"\n', '[sources.orders]\niceberg = "raw.orders"\n'
        )
    )
    cli(project, "build")
    # a new version: its source changed; validated (its shadow read from the source) and deployed
    cli(project, "validate", "daily_revenue", "--version", "v2")
    cli(project, "deploy", "daily_revenue")
    cli(project, "backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-03")
    assert read_outside(project) == texts(expected)

    with outside_catalog(project) as catalog:
        table = catalog.load_table("raw.orders")
        late = table.scan(limit=1).to_arrow().to_pylist()[0]
        late.update(order_id=10**6, status="completed", gross_amount=Decimal("5.00"))
        late.update(discount=Decimal("0.00"), refund=Decimal("0.00"))
        late["order_ts"] = late["order_ts"].replace(year=2025, month=1, day=2, hour=12)
        table.append(pa.Table.from_pylist([late], schema=table.schema().as_arrow()))
    cli(project, "rerun", "daily_revenue", "--partitions", "2025-01-02")
    completed = [r for r in read_outside(project) if r[:2] == ["2025-01-02", "completed"]]
    before = [r for r in texts(expected) if r[:2] == ["2025-01-02", "completed"]]
    assert int(completed[0][2]) == int(before[0][2]) + 1


def days_between(first: date, last: date) -> set[date]:
    return {first + timedelta(days=i) for i in range((last - first).days + 1)}
