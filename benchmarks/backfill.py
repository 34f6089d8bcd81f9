"""The reference backfill against raw DuckDB doing the same work, in the same run.

daily_revenue over 365 daily partitions of the generated orders (20,000 rows a day by default):
  - tidegate backfill, batch size 1 and 30 (checks and reconciliation on, ledger, markers);
  - raw DuckDB per partition in one transaction: DELETE+INSERT, the same check and
    reconciliation queries and a checkpoint row (the physical limit of the same work);
  - raw DuckDB per partition DELETE+INSERT without checks;
  - raw DuckDB, one CREATE TABLE AS for the year.
Each is run --runs times (default 3) and the median printed. tidegate is timed three ways: the
whole process (interpreter start, imports, opening the warehouse and the ledger); the command
called in this process, like the raw runs (which have DuckDB imported and time neither the
interpreter nor the imports) — from the call to its return, opening the project, the ledger and
the warehouse included; and the run itself (its start and end as the ledger recorded them).
The raw runs are timed from connecting to closing, as the called command opens and closes the
warehouse. Every copy of the warehouse is flushed to disk before a run starts, so that no run's
first fsync pays for writing the copy. tidegate's processes run with bytecode caching on, as an
installed package's modules are compiled (a PYTHONDONTWRITEBYTECODE in this environment would
otherwise have every process compile tidegate's sources again).
Prints ratios tidegate/raw for each, the peak memory of tidegate processes over 30 and 365
partitions, and the peak of tidegate's own Python heap over the same (DuckDB's memory apart).
With --peers, also the same backfill through SQLMesh and dbt-duckdb (see peers.py).

Usage: python benchmarks/backfill.py [ROWS_PER_DAY] [--runs N] [--max-concurrency N]
                                     [--peers [--peers-runs N]]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

import peers
from reference import CHECKS, DAILY, YEAR, fresh_project


def timed_process(args: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one tidegate process. Run these before anything
    grows this process: a child's peak RSS starts at its parent's size when it forks."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "tidegate", *args], stdout=subprocess.DEVNULL, env=environment
    )
    _, status, usage = os.wait4(process.pid, 0)
    assert status == 0, f"tidegate {' '.join(args)} failed"
    return time.perf_counter() - began, usage.ru_maxrss


def in_process(args: list[str]) -> float:
    """Wall seconds of one tidegate command called in this process, its output discarded."""
    from tidegate.cli import main as tidegate_main

    began = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            tidegate_main(args)
        except SystemExit as done:
            assert done.code in (0, None), f"tidegate {' '.join(args)} failed"
    return time.perf_counter() - began


def python_heap_peak(args: list[str]) -> int:
    """Peak bytes tidegate's own Python objects took during one command called in this process
    (tracemalloc: DuckDB's memory, its buffer cache included, is not Python's)."""
    tracemalloc.start()
    try:
        in_process(args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def recorded_seconds(project: Path) -> float:
    """How long the project's only backfill ran, from the start and end its ledger recorded."""
    con = sqlite3.connect(project / ".tidegate" / "state.db")
    try:
        [(started, ended)] = con.execute(
            "SELECT started_at, ended_at FROM runs WHERE kind = 'backfill'"
        ).fetchall()
    finally:
        con.close()
    return (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()


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
    con.close()
    began = time.perf_counter()
    con = duckdb.connect(str(warehouse))
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
    con.close()
    return time.perf_counter() - began


def raw_single(warehouse: Path, with_checks: bool) -> float:
    year = {"start": datetime(2025, 1, 1), "end": datetime(2026, 1, 1)}
    began = time.perf_counter()
    con = duckdb.connect(str(warehouse))
    con.execute("CREATE OR REPLACE TABLE raw_year AS " + DAILY, year)
    if with_checks:
        con.execute("CREATE OR REPLACE TEMP VIEW staged AS SELECT * FROM raw_year")
        for check in CHECKS:
            used = {k: v for k, v in year.items() if f"${k}" in check}
            con.execute(check, used).fetchall()
    con.close()
    return time.perf_counter() - began


def tidegate(args: list[str]) -> None:
    subprocess.run([sys.executable, "-m", "tidegate", *args], check=True, capture_output=True)


def on_a_copy(template: Path, folder: Path, runner: Callable[[Path], float]) -> float:
    """Run a raw runner on a fresh copy of the template's warehouse, flushed to disk first."""
    copy = folder / "raw.duckdb"
    shutil.copy(template / "warehouse.duckdb", copy)
    os.sync()
    try:
        return runner(copy)
    finally:
        copy.unlink()


def reference_project(folder: Path, rows_per_day: int) -> Path:
    """The orders example with `rows_per_day` orders a day, built, daily_revenue deployed."""
    template = folder / "template"
    tidegate(["init", str(template), "--example", "orders", "--rows-per-day", str(rows_per_day)])
    tidegate(["build", "--project", str(template)])
    tidegate(["deploy", "daily_revenue", "--project", str(template)])
    return template


def backfill_args(project: Path, partitions: str, batch: int, in_flight: int) -> list[str]:
    return [
        "backfill",
        "daily_revenue",
        "--partitions",
        partitions,
        "--batch-size",
        str(batch),
        "--max-concurrency",
        str(in_flight),
        "--project",
        str(project),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description="The reference backfill against raw DuckDB.")
    parser.add_argument("rows_per_day", nargs="?", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3, help="runs of each, median printed")
    parser.add_argument(
        "--max-concurrency", type=int, default=2, help="tidegate's batches in flight (default 2)"
    )
    parser.add_argument("--peers", action="store_true", help="also run SQLMesh and dbt-duckdb")
    parser.add_argument(
        "--peers-runs", type=int, help="runs per peer (default 3; 1 above 50,000 rows a day)"
    )
    args = parser.parse_args()
    rows_per_day: int = args.rows_per_day
    runs: int = args.runs
    folder = Path(tempfile.mkdtemp(prefix="tidegate-bench-"))
    try:
        template = reference_project(folder, rows_per_day)
        in_flight: int = args.max_concurrency

        def backfill(name: str, partitions: str, batch: int) -> tuple[float, float, int]:
            project = fresh_project(template, folder, name)
            wall, rss = timed_process(backfill_args(project, partitions, batch, in_flight))
            return wall, recorded_seconds(project), rss

        _, _, month_rss = backfill("month", "2025-01-01..2025-01-30", 1)
        measured = {
            batch: [backfill(f"batch{batch}", YEAR, batch) for _ in range(runs)]
            for batch in (1, 30)
        }
        wall = {b: statistics.median(m[0] for m in ms) for b, ms in measured.items()}
        inside = {b: statistics.median(m[1] for m in ms) for b, ms in measured.items()}
        year_rss = max(m[2] for m in measured[1])
        runners: dict[str, Callable[[Path], float]] = {
            "raw loop, same work + checkpoint": lambda w: raw_loop(w, True),
            "raw loop, DELETE+INSERT only": lambda w: raw_loop(w, False),
            "raw single CREATE TABLE AS + its checks": lambda w: raw_single(w, True),
            "raw single CREATE TABLE AS": lambda w: raw_single(w, False),
        }
        raw: dict[str, float] = {}
        for name, runner in runners.items():
            raw[name] = statistics.median(on_a_copy(template, folder, runner) for _ in range(runs))
        # in this process, after the child processes (whose peak memory starts at this one's):
        # a first call pays the imports, as the raw runs' `import duckdb` is not timed either
        in_process(
            backfill_args(fresh_project(template, folder, "warm"), "2025-01-01", 1, in_flight)
        )
        called = {
            batch: statistics.median(
                in_process(
                    backfill_args(fresh_project(template, folder, "called"), YEAR, batch, in_flight)
                )
                for _ in range(runs)
            )
            for batch in (1, 30)
        }
        # after the timed runs: tracing slows Python down
        heap = {
            days: python_heap_peak(
                backfill_args(fresh_project(template, folder, "heap"), partitions, 1, in_flight)
            )
            for days, partitions in ((30, "2025-01-01..2025-01-30"), (365, YEAR))
        }
        print(
            f"{365 * rows_per_day:,} orders, 365 daily partitions of daily_revenue; "
            f"median of {runs}; tidegate with --max-concurrency {args.max_concurrency}"
        )
        print(f"{'':<40} {'process':>8} {'called':>8} {'run':>8}")
        for batch in (1, 30):
            print(
                f"{'tidegate backfill, batch ' + str(batch):<40} {wall[batch]:7.2f}s "
                f"{called[batch]:7.2f}s {inside[batch]:7.2f}s"
            )
        for name, seconds in raw.items():
            print(f"{name:<40} {'':>8} {seconds:7.2f}s")
        print(
            f"peak memory, batch 1: 30 partitions {month_rss / 1024:.0f} MiB, 365 partitions "
            f"{year_rss / 1024:.0f} MiB (ratio {year_rss / month_rss:.2f}; DuckDB's buffer "
            "cache keeps the source blocks it read)"
        )
        print(
            f"peak Python heap of tidegate, batch 1: 30 partitions {heap[30] / 2**20:.1f} MiB, "
            f"365 partitions {heap[365] / 2**20:.1f} MiB (tracemalloc)"
        )
        same_work = raw["raw loop, same work + checkpoint"]
        single = raw["raw single CREATE TABLE AS + its checks"]
        for label, batch, base in (
            ("batch 1 / raw loop doing the same work", 1, same_work),
            ("batch 30 / raw single statement + checks", 30, single),
        ):
            print(
                f"ratio {label:<42} process {wall[batch] / base:5.2f}x, "
                f"called {called[batch] / base:5.2f}x, run {inside[batch] / base:5.2f}x"
            )
        if args.peers:
            peer_runs = args.peers_runs or peers.default_runs(rows_per_day)
            compared = peers.run_peers(template / "warehouse.duckdb", peer_runs, DAILY)
            for line in peers.report(compared, wall[1], same_work):
                print(line)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
