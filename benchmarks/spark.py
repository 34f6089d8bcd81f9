"""The reference backfill on Spark local[2]: tidegate against a plain PySpark job doing the work.

daily_revenue over the days of the generated orders (Parquet, `lake/orders`), at ROWS_PER_DAY:
  - tidegate backfill on a Spark warehouse (batch size --batch-size, 2 batches in flight):
    staging, checks, reconciliation, input fingerprints, the publish into an Iceberg table
    (written, added on a branch, audited, main moved) and the ledger;
  - a plain PySpark job: read the orders, aggregate per day and status, write Parquet
    partitioned by day (no checks, no ledger, no atomic publish).
Both in one process each, timed as a whole (interpreter and JVM start included) and, for
tidegate, as the run its ledger recorded. Prints the ratio tidegate / plain job.

Usage: python benchmarks/spark.py [ROWS_PER_DAY] [--days N] [--batch-size N]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from backfill import recorded_seconds

PLAIN_JOB = """
import sys
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.shuffle.partitions", "4").getOrCreate())
first, last = sys.argv[3], sys.argv[4]
orders = spark.read.parquet(sys.argv[1])
window = orders.where((F.col("order_ts") >= F.lit(first).cast("timestamp"))
                      & (F.col("order_ts") < F.lit(last).cast("timestamp")))
daily = window.groupBy(F.col("order_ts").cast("date").alias("order_date"), "status").agg(
    F.count("*").alias("order_count"),
    F.sum("gross_amount").cast("decimal(18,2)").alias("gross_revenue"),
    F.sum(F.col("gross_amount") - F.col("discount") - F.col("refund"))
    .cast("decimal(18,2)").alias("net_revenue"))
daily.write.partitionBy("order_date").mode("overwrite").parquet(sys.argv[2])
"""
SPARK_WAREHOUSE = 'engine = "spark"\nmaster = "local[2]"\nlocation = "lake"\n'


def run(args: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True)
    return time.perf_counter() - began


def spark_project(folder: Path, rows_per_day: int) -> Path:
    """The orders example on a Spark warehouse, daily_revenue deployed."""
    from tidegate.engines.spark_load import load_example

    project = folder / "project"
    tidegate = [sys.executable, "-m", "tidegate"]
    run([*tidegate, "init", str(project), "--example", "orders"])
    for leftover in project.glob("warehouse.duckdb*"):
        leftover.unlink()
    shutil.rmtree(project / ".tidegate", ignore_errors=True)
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text().replace(
            'engine = "duckdb"\npath = "warehouse.duckdb"\n', SPARK_WAREHOUSE
        )
    )
    load_example(project / "lake", rows_per_day)
    run([*tidegate, "build", "--project", str(project)])
    run([*tidegate, "deploy", "daily_revenue", "--project", str(project)])
    return project


def main() -> None:
    parser = argparse.ArgumentParser(description="The reference backfill on Spark local[2].")
    parser.add_argument("rows_per_day", nargs="?", type=int, default=1_000)
    parser.add_argument("--days", type=int, default=60, help="daily partitions (default 60)")
    parser.add_argument("--batch-size", type=int, default=30)
    args = parser.parse_args()
    first = date(2025, 1, 1)
    last = first + timedelta(days=args.days - 1)
    folder = Path(tempfile.mkdtemp(prefix="tidegate-spark-bench-"))
    try:
        project = spark_project(folder, args.rows_per_day)
        tidegate_seconds = run(
            [
                sys.executable, "-m", "tidegate", "backfill", "daily_revenue",
                "--partitions", f"{first}..{last}", "--batch-size", str(args.batch_size),
                "--project", str(project),
            ]
        )  # fmt: skip
        inside = recorded_seconds(project)
        plain_seconds = run(
            [
                sys.executable, "-c", PLAIN_JOB, str(project / "lake" / "orders"),
                str(folder / "plain"), str(first), str(last + timedelta(days=1)),
            ]
        )  # fmt: skip
        print(
            f"{args.days} daily partitions of daily_revenue, {args.rows_per_day:,} orders a day, "
            f"Spark local[2], tidegate batch size {args.batch_size}"
        )
        print(f"tidegate backfill       process {tidegate_seconds:7.2f}s  run {inside:7.2f}s")
        print(f"plain PySpark job       process {plain_seconds:7.2f}s")
        print(f"ratio tidegate / plain  process {tidegate_seconds / plain_seconds:5.2f}x")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
