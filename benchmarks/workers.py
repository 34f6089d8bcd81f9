"""A distributed backfill of daily_revenue over a year, its ledger in PostgreSQL, run by 1 and by
2 `tidegate worker` processes, against the same backfill in one process. On a PostgreSQL
warehouse (the default) also against a raw per-day DELETE+INSERT loop in PostgreSQL doing the
same writes; with `--engine spark`, on a Spark local[2] warehouse (each worker its own JVM; see
spark.py for tidegate against a plain PySpark job).

    .venv/bin/python benchmarks/workers.py [ROWS_PER_DAY] [--batch-size N] [--server URL]
        [--engine postgres|spark] [--days N]

Each measurement gets a fresh database on the server (dropped afterwards); the wall time runs
from the coordinator's start to its exit."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from tidegate.engines.postgres import load_example

TIDEGATE = [sys.executable, "-m", "tidegate"]
SQLITE_STATE = '[state]\npath = ".tidegate/state.db"\n'
DUCKDB_WAREHOUSE = 'engine = "duckdb"\npath = "warehouse.duckdb"\n'
SPARK_WAREHOUSE = 'engine = "spark"\nmaster = "local[2]"\nlocation = "lake"\n'


@contextmanager
def database(server: str) -> Iterator[str]:
    name = f"tg_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as con:
        con.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(urlsplit(server)._replace(path="/" + name))
    finally:
        with psycopg.connect(server, autocommit=True) as con:
            con.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def cli(*args: str | Path) -> None:
    subprocess.run([*TIDEGATE, *[str(a) for a in args]], check=True, capture_output=True)


def project(folder: Path, dsn: str, rows_per_day: int, engine: str) -> Path:
    """The orders example with its ledger in `dsn` and its warehouse there too (or a Spark
    location in the project), daily_revenue deployed."""
    root = folder / "project"
    cli("init", root, "--example", "orders", "--rows-per-day", "1")
    for leftover in [*root.glob("warehouse.duckdb*"), root / ".tidegate" / "state.db"]:
        leftover.unlink(missing_ok=True)
    config = root / "tidegate.toml"
    warehouse = SPARK_WAREHOUSE if engine == "spark" else f'engine = "postgres"\ndsn = "{dsn}"\n'
    text = config.read_text().replace(DUCKDB_WAREHOUSE, warehouse)
    config.write_text(text.replace(SQLITE_STATE, f'[state]\nurl = "{dsn}"\nschema = "ledger"\n'))
    if engine == "spark":
        from tidegate.engines.spark_load import load_example as load_parquet

        load_parquet(root / "lake", rows_per_day)
    else:
        load_example(dsn, rows_per_day=rows_per_day)
    cli("build", "--project", root)
    cli("deploy", "daily_revenue", "--project", root)
    return root


def distributed(root: Path, dsn: str, workers: int, batch_size: int, days: str) -> float:
    began = time.perf_counter()
    coordinator = subprocess.Popen(
        [
            *TIDEGATE,
            "backfill",
            "daily_revenue",
            "--partitions",
            days,
            "--batch-size",
            str(batch_size),
            "--max-concurrency",
            str(workers),
            "--distributed",
            "--project",
            str(root),
        ],
        stdout=subprocess.DEVNULL,
    )
    queued = "SELECT count(*) FROM ledger.runs WHERE distributed = 1"
    with psycopg.connect(dsn) as con:
        while con.execute(queued).fetchone() == (0,):
            time.sleep(0.02)
    pool = [
        subprocess.Popen(
            [
                *TIDEGATE,
                "worker",
                "--exit-when-idle",
                "--poll-seconds",
                "0.1",
                "--project",
                str(root),
            ],
            stdout=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    if coordinator.wait() != 0:
        raise SystemExit("the distributed backfill failed")
    seconds = time.perf_counter() - began
    for worker in pool:
        worker.wait()
    return seconds


def one_process(root: Path, batch_size: int, days: str) -> float:
    began = time.perf_counter()
    cli(
        "backfill",
        "daily_revenue",
        "--partitions",
        days,
        "--batch-size",
        str(batch_size),
        "--project",
        root,
    )
    return time.perf_counter() - began


def raw_loop(dsn: str, count: int) -> float:
    """The same per-day writes by hand: each day's aggregate DELETE+INSERT in a transaction."""
    aggregate = (
        "INSERT INTO daily_raw SELECT CAST(order_ts AS DATE), status, count(*), "
        "sum(gross_amount), sum(gross_amount - discount - refund) FROM orders "
        "WHERE order_ts >= %(start)s AND order_ts < %(end)s GROUP BY 1, 2"
    )
    remove = "DELETE FROM daily_raw WHERE order_date >= %(start)s AND order_date < %(end)s"
    first = datetime(2025, 1, 1)
    with psycopg.connect(dsn) as con:
        con.execute(
            "CREATE TABLE daily_raw (order_date DATE, status TEXT, order_count BIGINT, "
            "gross_revenue NUMERIC(18, 2), net_revenue NUMERIC(18, 2))"
        )
        con.commit()
        began = time.perf_counter()
        for day in range(count):
            bounds = {"start": first + timedelta(days=day), "end": first + timedelta(days=day + 1)}
            with con.transaction():
                con.execute(remove, bounds)
                con.execute(aggregate, bounds)
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rows_per_day", type=int, nargs="?", default=2000)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--engine", choices=("postgres", "spark"), default="postgres")
    parser.add_argument("--days", type=int, default=365, help="from 2025-01-01 (at most 365)")
    args = parser.parse_args()
    last = datetime(2025, 1, 1) + timedelta(days=min(args.days, 365) - 1)
    days = f"2025-01-01..{last:%Y-%m-%d}"
    runs = [("one process", 0), ("1 worker", 1), ("2 workers", 2)]
    if args.engine == "postgres":
        runs.insert(0, ("raw", 0))
    results: dict[str, float] = {}
    for label, workers in runs:
        with tempfile.TemporaryDirectory() as folder, database(args.server) as dsn:
            root = project(Path(folder), dsn, args.rows_per_day, args.engine)
            if label == "raw":
                results[label] = raw_loop(dsn, min(args.days, 365))
            elif label == "one process":
                results[label] = one_process(root, args.batch_size, days)
            else:
                results[label] = distributed(root, dsn, workers, args.batch_size, days)
        print(f"{label:<12} {results[label]:7.2f} s", flush=True)
    summary = (
        f"{args.engine}, {days} x {args.rows_per_day} orders a day, batch size {args.batch_size}: "
        f"2 workers / 1 worker {results['2 workers'] / results['1 worker']:.2f}, "
        f"1 worker / one process {results['1 worker'] / results['one process']:.2f}"
    )
    if "raw" in results:
        raw = results["raw"]
        summary += (
            f"; against the raw loop: one process {results['one process'] / raw:.2f}x, "
            f"1 worker {results['1 worker'] / raw:.2f}x, "
            f"2 workers {results['2 workers'] / raw:.2f}x"
        )
    print(summary)


if __name__ == "__main__":
    main()
