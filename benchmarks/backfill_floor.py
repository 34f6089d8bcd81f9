"""How close to the raw single statement a batch-30 backfill could come without its guarantees.

An ablation, not a mode of tidegate: the reference year of daily_revenue at batch size 30, called
in this process as in backfill.py, three ways interleaved run by run:
  - tidegate as it is;
  - the same with the ledger's per-step records skipped (the intents, the state moves, the
    recorded inputs, the audits and the publishes of every attempt) and the input fingerprints
    hashing one column of each source row instead of all of them;
  - raw DuckDB: one CREATE TABLE AS for the year and its checks (backfill.py's baseline).
The second is what a backfill without checkpoints and without input fingerprints would cost at
best; the warehouse side (staging, checks, checksums, reconciliation, the publish with its
markers) is unchanged. Prints the medians and the ratios to the raw statement.

Usage: python benchmarks/backfill_floor.py [ROWS_PER_DAY] [--runs N] [--max-concurrency N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlglot import exp

from backfill import (
    YEAR,
    backfill_args,
    fresh_project,
    in_process,
    on_a_copy,
    raw_single,
    reference_project,
)
from tidegate.sql import statements
from tidegate.state.sqlite import SQLiteStateStore

LEDGER_STEPS = (
    "create_attempts",
    "move_attempts",
    "record_inputs_many",
    "record_audits",
    "publish_many",
)


def _skipped(*_: Any, **__: Any) -> None:
    return None


@contextmanager
def without_guarantees() -> Iterator[None]:
    """The ledger's per-attempt records skipped, input fingerprints of one column."""
    kept = {name: getattr(SQLiteStateStore, name) for name in LEDGER_STEPS}
    hashed = statements.DUCKDB.native_hash
    for name in LEDGER_STEPS:
        setattr(SQLiteStateStore, name, _skipped)
    # the flavor is frozen: its hash is swapped for this ablation only
    object.__setattr__(statements.DUCKDB, "native_hash", lambda values: exp.func("hash", values[0]))
    try:
        yield
    finally:
        for name, method in kept.items():
            setattr(SQLiteStateStore, name, method)
        object.__setattr__(statements.DUCKDB, "native_hash", hashed)


def main() -> None:
    parser = argparse.ArgumentParser(description="A batch-30 backfill without its guarantees.")
    parser.add_argument("rows_per_day", nargs="?", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=7, help="runs of each, median printed")
    parser.add_argument("--max-concurrency", type=int, default=2)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="tidegate-floor-"))
    try:
        template = reference_project(folder, args.rows_per_day)

        def backfill(partitions: str) -> float:
            project = fresh_project(template, folder, "called")
            return in_process(backfill_args(project, partitions, 30, args.max_concurrency))

        def ablated() -> float:
            with without_guarantees():
                return backfill(YEAR)

        def raw() -> float:
            return on_a_copy(template, folder, lambda warehouse: raw_single(warehouse, True))

        backfill("2025-01-01")  # the imports, untimed as the raw runs' `import duckdb` is
        runners: dict[str, Callable[[], float]] = {
            "tidegate backfill, batch 30": lambda: backfill(YEAR),
            "  without ledger records, 1-column fingerprints": ablated,
            "raw single CREATE TABLE AS + its checks": raw,
        }
        times: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(args.runs):
            for name, runner in runners.items():
                times[name].append(runner())
        base = statistics.median(times["raw single CREATE TABLE AS + its checks"])
        print(f"{365 * args.rows_per_day:,} orders; median of {args.runs}, runs interleaved")
        for name, samples in times.items():
            median = statistics.median(samples)
            print(f"{name:<50} {median:6.3f}s  {median / base:5.2f}x raw")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
