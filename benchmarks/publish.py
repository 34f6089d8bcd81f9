"""Write–audit–publish of a year of daily partitions against raw DuckDB doing the same work.

Usage: python benchmarks/publish.py [ROWS_PER_DAY]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

DAILY_SQL = (
    "SELECT CAST(order_ts AS DATE) AS order_date, status, count(*) AS order_count, "
    "CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross_revenue, "
    "CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue "
    "FROM orders WHERE order_ts >= $start AND order_ts < $end "
    "GROUP BY CAST(order_ts AS DATE), status"
)


def tidegate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidegate", *args], check=True, capture_output=True, text=True
    )


def timed_tidegate_run(project: Path, partitions: str) -> tuple[float, int]:
    """Seconds and peak RSS (KiB) of one `tidegate run` process."""
    began = time.perf_counter()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tidegate",
            "run",
            "daily_revenue",
            "--partition",
            partitions,
            "--project",
            str(project),
        ],
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - began
    assert status == 0, "tidegate run failed"
    return seconds, usage.ru_maxrss


def raw_per_day(warehouse: Path) -> float:
    """The same 365 partition writes with nothing but DuckDB: no checks, no ledger."""
    con = duckdb.connect(str(warehouse))
    first = datetime(2025, 1, 1)
    year = {"start": first, "end": first + timedelta(days=365)}
    con.execute("CREATE OR REPLACE TABLE raw_daily AS " + DAILY_SQL + " LIMIT 0", year)
    began = time.perf_counter()
    for day in range(365):
        bounds = {"start": first + timedelta(days=day), "end": first + timedelta(days=day + 1)}
        con.execute("BEGIN")
        con.execute(
            "DELETE FROM raw_daily WHERE order_date >= $start AND order_date < $end", bounds
        )
        con.execute("INSERT INTO raw_daily " + DAILY_SQL, bounds)
        con.execute("COMMIT")
    seconds = time.perf_counter() - began
    con.close()
    return seconds


def raw_one_query(warehouse: Path) -> float:
    con = duckdb.connect(str(warehouse))
    began = time.perf_counter()
    year = {"start": datetime(2025, 1, 1), "end": datetime(2026, 1, 1)}
    con.execute("CREATE OR REPLACE TABLE raw_year AS " + DAILY_SQL, year)
    seconds = time.perf_counter() - began
    con.close()
    return seconds


def main() -> None:
    rows_per_day = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    folder = Path(tempfile.mkdtemp(prefix="tidegate-bench-"))
    try:
        project = folder / "p"
        tidegate("init", str(project), "--example", "orders", "--rows-per-day", str(rows_per_day))
        tidegate("build", "--project", str(project))
        tidegate("deploy", "daily_revenue", "--project", str(project))
        _, small_rss = timed_tidegate_run(project, "2025-01-01..2025-01-30")
        year_seconds, year_rss = timed_tidegate_run(project, "2025-01-01..2025-12-31")
        status = json.loads(
            tidegate("status", "daily_revenue", "--project", str(project), "--json").stdout
        )
        assert status["models"][0]["partitions"]["published"] == 365
        raw_copy = folder / "raw.duckdb"
        shutil.copy(project / "warehouse.duckdb", raw_copy)
        per_day = raw_per_day(raw_copy)
        one = raw_one_query(raw_copy)
        print(f"rows per day: {rows_per_day:,}; 365 daily partitions")
        print(f"tidegate run (write-audit-publish, ledger)  {year_seconds:7.2f} s")
        print(
            f"raw DuckDB, per-day DELETE+INSERT           {per_day:7.2f} s  "
            f"ratio {year_seconds / per_day:5.1f}x"
        )
        print(
            f"raw DuckDB, one GROUP BY for the year       {one:7.2f} s  "
            f"ratio {year_seconds / one:5.1f}x"
        )
        print(
            f"per partition: tidegate {year_seconds / 365 * 1000:.1f} ms, "
            f"raw {per_day / 365 * 1000:.1f} ms"
        )
        print(
            f"peak memory: 30 partitions {small_rss / 1024:.0f} MiB, "
            f"365 partitions {year_rss / 1024:.0f} MiB "
            f"(ratio {year_rss / small_rss:.2f}; flat means bounded by the batch)"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
