"""What a change costs the reference backfill: the same year at batch size 1 (benchmarks/
backfill.py's reference) with two source trees of tidegate, interleaved in one run.

Each side builds its own reference project with its own code (a ledger is migrated by the code
that made it, and an older tidegate refuses a newer ledger); then each run backfills the year
on a fresh copy of its side's project, alternating before, after, before, …, so that a machine
busier at one moment weighs on both. Timed as whole processes (interpreter start, imports,
opening the warehouse and the ledger included). Prints each side's median and after/before.

Usage: python benchmarks/before_after.py BEFORE_SRC AFTER_SRC [ROWS_PER_DAY] [--runs N]
                                         [--batch-size N]
(BEFORE_SRC and AFTER_SRC are `src` folders, e.g. of a `git worktree` at the older commit.)
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
from pathlib import Path

from backfill import YEAR, backfill_args


def tidegate(source: Path, args: list[str]) -> float:
    """Wall seconds of one tidegate process running the code under `source`."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPATH"] = str(source)
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tidegate", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=environment,
        text=True,
    )
    assert done.returncode == 0, f"tidegate {' '.join(args)} failed: {done.stderr}"
    return time.perf_counter() - began


def template(source: Path, folder: Path, rows_per_day: int) -> Path:
    project = folder / "template"
    tidegate(
        source, ["init", str(project), "--example", "orders", "--rows-per-day", str(rows_per_day)]
    )
    tidegate(source, ["build", "--project", str(project)])
    tidegate(source, ["deploy", "daily_revenue", "--project", str(project)])
    return project


def backfill(source: Path, project: Path, folder: Path, batch: int) -> float:
    copy = folder / "run"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(project, copy)
    os.sync()
    try:
        return tidegate(source, backfill_args(copy, YEAR, batch, 1))
    finally:
        shutil.rmtree(copy)


def main() -> None:
    parser = argparse.ArgumentParser(description="A change's cost to the reference backfill.")
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("rows_per_day", type=int, nargs="?", default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1)
    options = parser.parse_args()
    sides = {"before": options.before.resolve(), "after": options.after.resolve()}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        projects = {}
        for name, source in sides.items():
            (root / name).mkdir()
            projects[name] = template(source, root / name, options.rows_per_day)
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(options.runs):
            for name, source in sides.items():
                times[name].append(
                    backfill(source, projects[name], root / name, options.batch_size)
                )
    medians = {name: statistics.median(found) for name, found in times.items()}
    print(
        f"reference year, batch size {options.batch_size}, {options.rows_per_day:,} orders a "
        f"day, {options.runs} interleaved runs each (whole processes):"
    )
    for name, found in times.items():
        shown = ", ".join(f"{t:.2f}" for t in found)
        print(f"  {name:<7} median {medians[name]:.2f} s  ({shown})")
    print(f"  after/before {medians['after'] / medians['before']:.3f}")


if __name__ == "__main__":
    main()
