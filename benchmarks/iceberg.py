"""The reference backfill published into Iceberg tables against the same into DuckDB tables.

The orders example at ROWS_PER_DAY (20,000 by default), one project initialised once and built
twice: as it is (DuckDB computes and publishes into tables of its file) and with
`tables = "iceberg"` (DuckDB computes, each publish goes through an Iceberg branch of a SQLite
catalog in `lake/`: written, its files audited, main fast-forwarded). daily_revenue is deployed
on both, then, on fresh copies, alternating DuckDB and Iceberg in each of --runs runs:
  (a) the year (365 daily partitions) backfilled at batch size 30;
  (b) --days days (30 by default) backfilled at batch size 1: wall time per partition, that is
      per publish (each batch of one partition is one publish).
Each backfill is timed as a whole process (interpreter start, imports, opening the warehouse,
the catalog and the ledger) and as the run its ledger recorded; medians of N are printed, with
Iceberg / DuckDB. Before printing, the rows of daily_revenue must be equal on both (the last
run's copies): the Iceberg table read by pyiceberg alone (its SQL catalog opened as any outside
reader would), the DuckDB table read by duckdb.

Usage: python benchmarks/iceberg.py [ROWS_PER_DAY] [--runs N] [--days N] [--max-concurrency N]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import sys
import tempfile
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb

from backfill import YEAR, fresh_project, recorded_seconds, tidegate, timed_process

DUCKDB_WAREHOUSE = '[warehouse]\nengine = "duckdb"\npath = "warehouse.duckdb"\n'
ICEBERG_KEYS = 'tables = "iceberg"\nnamespace = "analytics"\n'
KINDS = ("duckdb", "iceberg")


def templates(folder: Path, rows_per_day: int) -> dict[str, Path]:
    """The orders example initialised once (the same rows for both), copied, one copy
    configured for Iceberg tables; each built and daily_revenue deployed."""
    initialised = folder / "initialised"
    tidegate(["init", str(initialised), "--example", "orders", "--rows-per-day", str(rows_per_day)])
    made: dict[str, Path] = {}
    for kind in KINDS:
        template = folder / f"template-{kind}"
        shutil.copytree(initialised, template)
        if kind == "iceberg":
            config = template / "tidegate.toml"
            text = config.read_text()
            assert DUCKDB_WAREHOUSE in text, "the example's [warehouse] changed"
            config.write_text(text.replace(DUCKDB_WAREHOUSE, DUCKDB_WAREHOUSE + ICEBERG_KEYS))
        tidegate(["build", "--project", str(template)])
        tidegate(["deploy", "daily_revenue", "--project", str(template)])
        made[kind] = template
    shutil.rmtree(initialised)
    return made


def backfill_args(project: Path, partitions: str, batch: int, in_flight: int) -> list[str]:
    return [
        "backfill", "daily_revenue", "--partitions", partitions, "--batch-size", str(batch),
        "--max-concurrency", str(in_flight), "--project", str(project),
    ]  # fmt: skip


def duckdb_rows(project: Path) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(project / "warehouse.duckdb"), read_only=True)
    try:
        return sorted(con.execute("SELECT * FROM daily_revenue").fetchall())
    finally:
        con.close()


def iceberg_rows(project: Path) -> list[tuple[Any, ...]]:
    """daily_revenue as any Iceberg reader finds it: the SQL catalog by name, main's snapshot."""
    from pyiceberg.catalog.sql import SqlCatalog

    lake = (project / "lake").resolve()
    catalog = SqlCatalog(
        "tidegate", uri=f"sqlite:///{lake / 'catalog.db'}", warehouse=lake.as_uri()
    )
    try:
        table = catalog.load_table("analytics.daily_revenue").scan().to_arrow()
    finally:
        catalog.engine.dispose()
    columns = [table.column(name).to_pylist() for name in table.column_names]
    return sorted(zip(*columns, strict=True))


def equal_outputs(projects: dict[str, Path], label: str, expected_rows: int) -> None:
    on_duckdb, on_iceberg = duckdb_rows(projects["duckdb"]), iceberg_rows(projects["iceberg"])
    assert len(on_duckdb) == expected_rows, f"{label}: {len(on_duckdb)} rows on DuckDB"
    assert on_duckdb == on_iceberg, f"{label}: the Iceberg table differs from the DuckDB table"


def main() -> None:
    parser = argparse.ArgumentParser(description="Iceberg tables against DuckDB tables.")
    parser.add_argument("rows_per_day", nargs="?", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3, help="runs of each, median printed")
    parser.add_argument("--days", type=int, default=30, help="partitions of the batch-1 backfill")
    parser.add_argument(
        "--max-concurrency", type=int, default=2, help="tidegate's batches in flight (default 2)"
    )
    args = parser.parse_args()
    rows_per_day: int = args.rows_per_day
    in_flight: int = args.max_concurrency
    first = date(2025, 1, 1)
    days = f"{first}..{first + timedelta(days=args.days - 1)}"
    folder = Path(tempfile.mkdtemp(prefix="tidegate-iceberg-bench-"))
    try:
        template = templates(folder, rows_per_day)
        # (kind, what) -> [(process seconds, run seconds)]
        measured: dict[tuple[str, str], list[tuple[float, float]]] = {}
        last: dict[str, dict[str, Path]] = {"year": {}, "days": {}}
        for _ in range(args.runs):
            for what, partitions, batch in (("year", YEAR, 30), ("days", days, 1)):
                for kind in KINDS:
                    project = fresh_project(template[kind], folder, f"{kind}-{what}")
                    wall, _ = timed_process(backfill_args(project, partitions, batch, in_flight))
                    measured.setdefault((kind, what), []).append((wall, recorded_seconds(project)))
                    last[what][kind] = project
        equal_outputs(last["year"], "the year at batch size 30", 365 * 4)
        equal_outputs(last["days"], f"{args.days} days at batch size 1", args.days * 4)
        process = {k: statistics.median(m[0] for m in ms) for k, ms in measured.items()}
        run = {k: statistics.median(m[1] for m in ms) for k, ms in measured.items()}
        print(" ".join(["python benchmarks/iceberg.py", *sys.argv[1:]]))
        print(
            f"{365 * rows_per_day:,} orders ({rows_per_day:,} a day), daily_revenue; median of "
            f"{args.runs}; --max-concurrency {in_flight}; outputs equal (pyiceberg / duckdb)"
        )
        # pyarrow's dataset module, which pyiceberg's Arrow writer imports, imports pandas when
        # it is installed: 0.2 s of every Iceberg process that an install of tidegate[iceberg]
        # alone does not pay
        pandas = "installed" if importlib.util.find_spec("pandas") else "not installed"
        print(f"in {sys.prefix} (pandas {pandas})")
        print(f"{'':<46} {'process':>9} {'run':>9}")
        for what, label in (
            ("year", "year, batch size 30"),
            ("days", f"{args.days} days, batch size 1"),
        ):
            for kind in KINDS:
                print(
                    f"{label + ' into ' + kind + ' tables':<46} {process[kind, what]:8.2f}s "
                    f"{run[kind, what]:8.2f}s"
                )
        for kind in KINDS:
            per = {
                t: 1000 * timing[kind, "days"] / args.days
                for t, timing in (("p", process), ("r", run))
            }
            print(
                f"{'ms per publish (batch size 1) on ' + kind:<46} {per['p']:7.1f}ms "
                f"{per['r']:7.1f}ms"
            )
        for what, label in (("year", "year, batch 30"), ("days", "per publish, batch 1")):
            print(
                f"ratio Iceberg / DuckDB, {label:<22} process "
                f"{process['iceberg', what] / process['duckdb', what]:5.2f}x, "
                f"run {run['iceberg', what] / run['duckdb', what]:5.2f}x"
            )
        year = process["iceberg", "year"] / process["duckdb", "year"]
        verdict = "met" if year <= 3 else "not met"
        print(f"target: the year at batch 30 within 3x of DuckDB tables: {verdict}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
