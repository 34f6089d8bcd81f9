"""The fixed cost of a tidegate command, as whole processes, against the raw engine in the same run.

On the orders example (ROWS_PER_DAY orders a day, 20,000 unless given; built, daily_revenue
deployed, its first ten days backfilled), each timed as a process (interpreter start, imports,
opening the project, the ledger and the warehouse), median of --runs:
  - `python -c "import duckdb"`: what any DuckDB program pays before its first statement;
  - `tidegate status` and `tidegate show partition daily_revenue 2025-01-05`, against it (target
    at most 1.5x), and the peak RSS of `status` (target at most 80 MiB);
  - a one-partition backfill (a day not yet published) against a process running the same
    partition's statement in DuckDB (DELETE + INSERT of that day in one transaction): the
    difference is the write command's fixed cost (target at most 0.25 s);
  - the whole year in one batch (`--batch-size 365`) against a process running the year's one
    CREATE TABLE AS and the same checks (target at most 1.5x);
  - `status` and the one-partition backfill again with a 10 MB model file beside the others
    (a model the command does not touch; `[limits] model_file_bytes` raised for it), against
    the same without it: a command's cost must not grow with the size of unrelated model files.
`--src PATH` runs tidegate from another source tree (the `src` of a `git worktree` at an older
commit), to print the same table before a change.

Usage: python benchmarks/startup.py [ROWS_PER_DAY] [--runs N] [--src PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from reference import CHECKS, DAILY, YEAR, fresh_project

FIRST_DAYS = "2025-01-01..2025-01-10"
SHOWN_DAY = "2025-01-05"
WRITTEN_DAY = "2025-02-03"
BIG_MODEL_BYTES = 10 * 2**20
# what a raw DuckDB program runs, given the warehouse file as its argument
RAW_PARTITION = f"""
import sys
from datetime import datetime
import duckdb
con = duckdb.connect(sys.argv[1])
bounds = {{"start": datetime(2025, 2, 3), "end": datetime(2025, 2, 4)}}
con.execute("BEGIN")
con.execute("DELETE FROM raw_daily WHERE order_date >= $start AND order_date < $end", bounds)
con.execute("INSERT INTO raw_daily " + {DAILY!r}, bounds)
con.execute("COMMIT")
con.close()
"""
# the raw programs' table, holding the days tidegate published
RAW_TABLE = f"""
import sys
from datetime import datetime
import duckdb
con = duckdb.connect(sys.argv[1])
days = {{"start": datetime(2025, 1, 1), "end": datetime(2025, 1, 11)}}
con.execute("CREATE TABLE raw_daily AS " + {DAILY!r}, days)
con.close()
"""
RAW_YEAR = f"""
import sys
from datetime import datetime
import duckdb
con = duckdb.connect(sys.argv[1])
year = {{"start": datetime(2025, 1, 1), "end": datetime(2026, 1, 1)}}
con.execute("CREATE OR REPLACE TABLE raw_year AS " + {DAILY!r}, year)
con.execute("CREATE OR REPLACE TEMP VIEW staged AS SELECT * FROM raw_year")
for check in {CHECKS!r}:
    con.execute(check, {{k: v for k, v in year.items() if "$" + k in check}}).fetchall()
con.close()
"""


class Runner:
    """Processes of this interpreter, tidegate's from `src` when given, with bytecode caching
    on (as an installed package's modules are compiled)."""

    def __init__(self, src: Path | None) -> None:
        self.environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        if src is not None:
            self.environment["PYTHONPATH"] = str(src.resolve())

    def timed(self, args: list[str]) -> tuple[float, int]:
        """Wall seconds and peak RSS (KiB) of one process of `python ARGS`."""
        began = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, *args], stdout=subprocess.DEVNULL, env=self.environment
        )
        _, status, usage = os.wait4(process.pid, 0)
        assert status == 0, f"python {' '.join(args)} failed"
        return time.perf_counter() - began, usage.ru_maxrss

    def tidegate(self, args: list[str]) -> None:
        subprocess.run(
            [sys.executable, "-m", "tidegate", *args],
            check=True,
            capture_output=True,
            env=self.environment,
        )


def median(runs: int, measure: Callable[[], tuple[float, int]]) -> tuple[float, int]:
    """Median wall seconds of `runs` measurements, and the largest peak RSS among them."""
    taken = [measure() for _ in range(runs)]
    return statistics.median(t[0] for t in taken), max(t[1] for t in taken)


def reference(runner: Runner, folder: Path, rows_per_day: int) -> Path:
    """The orders example, built, daily_revenue deployed and its first days published, a raw
    table beside it for the raw programs; read once by `status` (the project cache filled)."""
    template = folder / "template"
    runner.tidegate(
        ["init", str(template), "--example", "orders", "--rows-per-day", str(rows_per_day)]
    )
    for args in (
        ["build"],
        ["deploy", "daily_revenue"],
        ["backfill", "daily_revenue", "--partitions", FIRST_DAYS],
        ["status"],
    ):
        runner.tidegate([*args, "--project", str(template)])
    runner.timed(["-c", RAW_TABLE, str(template / "warehouse.duckdb")])
    return template


def with_big_model(runner: Runner, template: Path, folder: Path) -> Path:
    """A copy of the project with a 10 MB SQL model (a long comment) nobody reads, loaded once."""
    project = fresh_project(template, folder, "big-template")
    settings = project / "tidegate.toml"
    settings.write_text(
        settings.read_text() + f"\n[limits]\nmodel_file_bytes = {2 * BIG_MODEL_BYTES}\n"
    )
    source = (project / "models" / "monthly_revenue.sql").read_text()
    padding = "-- " + "x" * 96 + "\n"
    (project / "models" / "big_model.sql").write_text(
        source + padding * (BIG_MODEL_BYTES // len(padding))
    )
    runner.tidegate(["status", "--project", str(project)])
    return project


def main() -> None:
    parser = argparse.ArgumentParser(description="The fixed cost of tidegate commands.")
    parser.add_argument("rows_per_day", nargs="?", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5, help="runs of each, median printed")
    parser.add_argument("--src", type=Path, default=None, help="run tidegate from this src")
    args = parser.parse_args()
    runs: int = args.runs
    runner = Runner(args.src)
    folder = Path(tempfile.mkdtemp(prefix="tidegate-startup-bench-"))
    try:
        template = reference(runner, folder, args.rows_per_day)
        big = with_big_model(runner, template, folder)

        def tidegate_on(project: Path, *command: str) -> tuple[float, int]:
            return runner.timed(["-m", "tidegate", *command, "--project", str(project)])

        def written(source: Path, *command: str) -> Callable[[], tuple[float, int]]:
            """A write command on a fresh copy of `source` each time."""
            return lambda: tidegate_on(fresh_project(source, folder, "written"), *command)

        def raw(program: str) -> Callable[[], tuple[float, int]]:
            def measure() -> tuple[float, int]:
                copy = fresh_project(template, folder, "raw")
                return runner.timed(["-c", program, str(copy / "warehouse.duckdb")])

            return measure

        one_day = ("backfill", "daily_revenue", "--partitions", WRITTEN_DAY)
        year = ("backfill", "daily_revenue", "--partitions", YEAR, "--batch-size", "365")
        measured = {
            "import duckdb": median(runs, lambda: runner.timed(["-c", "import duckdb"])),
            "status": median(runs, lambda: tidegate_on(template, "status")),
            "show partition": median(
                runs, lambda: tidegate_on(template, "show", "partition", "daily_revenue", SHOWN_DAY)
            ),
            "status, 10 MB model beside": median(runs, lambda: tidegate_on(big, "status")),
            "raw: one partition": median(runs, raw(RAW_PARTITION)),
            "backfill one partition": median(runs, written(template, *one_day)),
            "backfill one partition, 10 MB model beside": median(runs, written(big, *one_day)),
            "raw: the year's one statement + checks": median(runs, raw(RAW_YEAR)),
            "backfill the year in one batch": median(runs, written(template, *year)),
        }
        print(" ".join(["python benchmarks/startup.py", *sys.argv[1:]]))
        print(
            f"{365 * args.rows_per_day:,} orders, daily_revenue; whole processes, median of "
            f"{runs}; tidegate from {args.src or 'this checkout'}"
        )
        for name, (seconds, rss) in measured.items():
            print(f"{name:<46} {seconds:7.3f}s {rss / 1024:6.0f} MiB")
        base = measured["import duckdb"][0]

        def verdict(met: bool) -> str:
            return "met" if met else "NOT met"

        for name in ("status", "show partition"):
            ratio = measured[name][0] / base
            print(f"{name} / import duckdb: {ratio:.2f}x (target <= 1.5x: {verdict(ratio <= 1.5)})")
        status_rss = measured["status"][1] / 1024
        print(
            f"peak RSS of status: {status_rss:.0f} MiB (target <= 80: {verdict(status_rss <= 80)})"
        )
        fixed = measured["backfill one partition"][0] - measured["raw: one partition"][0]
        print(f"write fixed cost: {fixed:.3f}s (target <= 0.25 s: {verdict(fixed <= 0.25)})")
        whole = (
            measured["backfill the year in one batch"][0]
            / measured["raw: the year's one statement + checks"][0]
        )
        print(
            f"the year in one batch / raw: {whole:.2f}x (target <= 1.5x: {verdict(whole <= 1.5)})"
        )
        for name, without in (
            ("status, 10 MB model beside", "status"),
            ("backfill one partition, 10 MB model beside", "backfill one partition"),
        ):
            print(f"{name} / without: {measured[name][0] / measured[without][0]:.2f}x")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
