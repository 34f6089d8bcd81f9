"""The reference backfill against raw DuckDB doing the same work, in the same run.

daily_revenue over 365 daily partitions of the generated orders (20,000 rows a day by default):
  - tidegate backfill, batch size 1 and 30 (checks and reconciliation on, ledger, markers);
  - raw DuckDB per partition in one transaction: DELETE+INSERT, the same check and
    reconciliation queries and a checkpoint row (the physical limit of the same work);
  - raw DuckDB per partition DELETE+INSERT without checks;
  - raw DuckDB, one CREATE TABLE AS for the year.
Prints wall times, ratios tidegate/raw and peak memory of the tidegate processes.
With --peers, also the same backfill through SQLMesh and dbt-duckdb (see peers.py).

Usage: python benchmarks/backfill.py [ROWS_PER_DAY] [--peers [--peers-runs N]]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

import peers

YEAR = "2025-01-01..2025-12-31"
DAILY = (
    "SELECT CAST(order_ts AS DATE) AS order_date, status, count(*) AS order_count, "
    "CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross_revenue, "
    "CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue "
    "FROM orders WHERE order_ts >= $start AND order_ts < $end "
    "GROUP BY CAST(order_ts AS DATE), status"
)
# The same audits tidegate runs per partition: uniqueness, accepted values, the invariant, the
# partition bounds, and three reconciliations against the source.
CHECKS = (
    "SELECT count(*) FROM (SELECT order_date, status FROM staged GROUP BY ALL HAVING count(*) > 1)",
    "SELECT count(*) FROM staged WHERE status NOT IN "
    "('completed', 'shipped', 'cancelled', 'refunded')",
    "SELECT count(*) FROM staged WHERE NOT coalesce(net_revenue <= gross_revenue, false)",
    "SELECT count(*) FROM staged WHERE order_date < $start OR order_date >= $end",
    "SELECT count(*), sum(gross_amount), sum(gross_amount - discount - refund) FROM orders "
    "WHERE order_ts >= $start AND order_ts < $end",
    "SELECT sum(order_count), sum(gross_revenue), sum(net_revenue) FROM staged",
)


def timed_process(args: list[str]) -> tuple[float, int]:
    began = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "tidegate", *args], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    assert status == 0, f"tidegate {' '.join(args)} failed"
    return time.perf_counter() - began, usage.ru_maxrss


def days() -> list[dict[str, datetime]]:
    first = datetime(2025, 1, 1)
    return [
        {"start": first + timedelta(days=d), "end": first + timedelta(days=d + 1)}
        for d in range(365)
    ]


def raw_loop(warehouse: Path, with_checks: bool) -> float:
    con = duckdb.connect(str(warehouse))
    year = {"start": datetime(2025, 1, 1), "end": datetime(2026, 1, 1)}
    con.execute("CREATE OR REPLACE TABLE raw_daily AS " + DAILY + " LIMIT 0", year)
    con.execute("CREATE OR REPLACE TABLE raw_checkpoints (day DATE, committed_at TIMESTAMP)")
    began = time.perf_counter()
    for bounds in days():
        con.execute("BEGIN")
        if with_checks:
            con.execute("CREATE OR REPLACE TEMP TABLE staged AS " + DAILY, bounds)
            for check in CHECKS:
                used = {k: v for k, v in bounds.items() if f"${k}" in check}
                con.execute(check, used).fetchall()
            con.execute(
                "DELETE FROM raw_daily WHERE order_date >= $start AND order_date < $end", bounds
            )
            con.execute("INSERT INTO raw_daily SELECT * FROM staged")
            con.execute(
                "INSERT INTO raw_checkpoints VALUES ($start, now())", {"start": bounds["start"]}
            )
        else:
            con.execute(
                "DELETE FROM raw_daily WHERE order_date >= $start AND order_date < $end", bounds
            )
            con.execute("INSERT INTO raw_daily " + DAILY, bounds)
        con.execute("COMMIT")
    seconds = time.perf_counter() - began
    con.close()
    return seconds


def raw_single(warehouse: Path, with_checks: bool) -> float:
    con = duckdb.connect(str(warehouse))
    year = {"start": datetime(2025, 1, 1), "end": datetime(2026, 1, 1)}
    began = time.perf_counter()
    con.execute("CREATE OR REPLACE TABLE raw_year AS " + DAILY, year)
    if with_checks:
        con.execute("CREATE OR REPLACE TEMP VIEW staged AS SELECT * FROM raw_year")
        for check in CHECKS:
            used = {k: v for k, v in year.items() if f"${k}" in check}
            con.execute(check, used).fetchall()
    seconds = time.perf_counter() - began
    con.close()
    return seconds


def fresh_project(template: Path, folder: Path, name: str) -> Path:
    target = folder / name
    shutil.copytree(template, target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description="The reference backfill against raw DuckDB.")
    parser.add_argument("rows_per_day", nargs="?", type=int, default=20_000)
    parser.add_argument("--peers", action="store_true", help="also run SQLMesh and dbt-duckdb")
    parser.add_argument(
        "--peers-runs", type=int, help="runs per peer (default 3; 1 above 50,000 rows a day)"
    )
    args = parser.parse_args()
    rows_per_day: int = args.rows_per_day
    folder = Path(tempfile.mkdtemp(prefix="tidegate-bench-"))
    try:
        template = folder / "template"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "tidegate",
                "init",
                str(template),
                "--example",
                "orders",
                "--rows-per-day",
                str(rows_per_day),
            ],
            check=True,
            capture_output=True,
        )
        for command in (["build"], ["deploy", "daily_revenue"]):
            subprocess.run(
                [sys.executable, "-m", "tidegate", *command, "--project", str(template)],
                check=True,
                capture_output=True,
            )
        results: dict[str, tuple[float, int]] = {}
        month = fresh_project(template, folder, "month")
        _, month_rss = timed_process(
            [
                "backfill",
                "daily_revenue",
                "--partitions",
                "2025-01-01..2025-01-30",
                "--project",
                str(month),
            ]
        )
        for batch in (1, 30):
            project = fresh_project(template, folder, f"batch{batch}")
            results[f"batch {batch}"] = timed_process(
                [
                    "backfill",
                    "daily_revenue",
                    "--partitions",
                    YEAR,
                    "--batch-size",
                    str(batch),
                    "--project",
                    str(project),
                ]
            )
        raw: dict[str, float] = {}
        runners: dict[str, Callable[[Path], float]] = {
            "raw loop, same work + checkpoint": lambda w: raw_loop(w, True),
            "raw loop, DELETE+INSERT only": lambda w: raw_loop(w, False),
            "raw single CREATE TABLE AS + its checks": lambda w: raw_single(w, True),
            "raw single CREATE TABLE AS": lambda w: raw_single(w, False),
        }
        for name, runner in runners.items():
            copy = folder / "raw.duckdb"
            shutil.copy(template / "warehouse.duckdb", copy)
            raw[name] = runner(copy)
            copy.unlink()
        print(f"{365 * rows_per_day:,} orders, 365 daily partitions of daily_revenue")
        for name, (seconds, rss) in results.items():
            print(
                f"tidegate backfill, {name:<9}            {seconds:7.2f} s  "
                f"peak {rss / 1024:.0f} MiB"
            )
        for name, seconds in raw.items():
            print(f"{name:<38} {seconds:7.2f} s")
        year_rss = results["batch 1"][1]
        print(
            f"peak memory, batch 1: 30 partitions {month_rss / 1024:.0f} MiB, 365 partitions "
            f"{year_rss / 1024:.0f} MiB (ratio {year_rss / month_rss:.2f}; DuckDB's buffer "
            "cache keeps the source blocks it read)"
        )
        same_work = raw["raw loop, same work + checkpoint"]
        print(
            f"ratio batch 1 / raw loop doing the same work:   "
            f"{results['batch 1'][0] / same_work:5.2f}x"
        )
        single = raw["raw single CREATE TABLE AS + its checks"]
        print(
            f"ratio batch 30 / raw single statement + checks: "
            f"{results['batch 30'][0] / single:5.2f}x"
        )
        if args.peers:
            runs = args.peers_runs or peers.default_runs(rows_per_day)
            compared = peers.run_peers(template / "warehouse.duckdb", runs, DAILY)
            for line in peers.report(compared, results["batch 1"][0]):
                print(line)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
