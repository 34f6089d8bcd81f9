"""A dbt model's year backfill through tidegate, against the same model as a tidegate SQL model
and against dbt-duckdb's own microbatch run, in the same run.

The reference orders (backfill.py's project: the orders example, `ROWS_PER_DAY` orders a day of
2025) and daily_revenue over the 365 days of 2025:
  - tidegate SQL model: the orders example's `daily_revenue` (its contract, three checks and three
    reconciliations), `tidegate backfill daily_revenue --partitions 2025-01-01..2025-12-31
    --batch-size 1`;
  - tidegate dbt model: a dbt project written at run time (peers.py's dbt-duckdb microbatch
    project: a source `raw.orders` in schema `main` with event_time `order_ts`, an incremental
    microbatch model with event_time `order_date`, batch_size day, begin 2025-01-01, the same
    SELECT), building into the tidegate project's warehouse (`tidegate init --dbt`); its model
    with an enforced contract and dbt tests in place of the SQL model's checks (accepted_values
    and not_null on status; singular tests for unique (order_date, status) and net not above
    gross); reconciliations have no dbt counterpart. The same backfill command;
  - dbt-duckdb itself (peers.py): `dbt run --event-time-start 2025-01-01 --event-time-end
    2026-01-01`, one batch a day, `threads: 1`, on a fresh copy of the warehouse.
Both tidegate projects are built and deployed once (untimed for the backfills: for the dbt
project the first `tidegate build` runs `dbt compile`, the second finds it cached; both builds are
timed as processes and printed). Each run copies each project afresh (warehouse and ledger, the
dbt project's compile cache included) and times the backfill as a whole process; the SQL and the
dbt backfills alternate which goes first, and dbt-duckdb runs after them. After each dbt backfill
the compile cache must be untouched (no compile during the backfill). Medians over --runs.
Before any ratio is printed, the three outputs must hold the same rows (EXCEPT ALL both ways,
and equal counts), and dbt-duckdb's must show 365 one-day batches and equal one GROUP BY over the
year (peers.verify).

Usage: python benchmarks/dbt.py [ROWS_PER_DAY] [--runs N] [--max-concurrency N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

import backfill
import peers
from tidegate.execution.dbt import VENV_VARIABLE

MODEL = "daily_revenue"
# tidegate's dbt (dbt-core and dbt-duckdb), as the test suite shares it
SHARED_VENV = Path(os.environ.get("TMPDIR", "/tmp")) / "tidegate-test-dbt-venv"
# the dbt model's contract and tests: the SQL model's columns and checks, as dbt writes them
MODEL_YML = """version: 2
models:
  - name: daily_revenue
    config:
      contract:
        enforced: true
      on_schema_change: fail
    columns:
      - name: order_date
        data_type: date
        constraints: [{type: not_null}]
      - name: status
        data_type: varchar
        constraints: [{type: not_null}]
        data_tests:
          - not_null
          - accepted_values:
              arguments:
                values: [completed, shipped, cancelled, refunded]
      - name: order_count
        data_type: bigint
        constraints: [{type: not_null}]
      - name: gross_revenue
        data_type: decimal(18, 2)
        constraints: [{type: not_null}]
      - name: net_revenue
        data_type: decimal(18, 2)
        constraints: [{type: not_null}]
"""
# singular tests (tidegate runs each as a query check): dbt's `unique` takes one column, and
# tidegate skips one given an expression as its column_name ("not a column of the model")
SINGULAR_TESTS = {
    "unique_order_date_status": (
        "select order_date, status from {{ ref('daily_revenue') }}\n"
        "group by order_date, status having count(*) > 1\n"
    ),
    "net_not_above_gross": (
        "select order_date, status, net_revenue, gross_revenue\n"
        "from {{ ref('daily_revenue') }}\nwhere net_revenue > gross_revenue\n"
    ),
}
COMPILE_LOG = Path(".tidegate") / "dbt" / "compile.log"


@dataclass
class Side:
    label: str
    template: Path
    run_name: str
    process: list[float] = field(default_factory=list)
    recorded: list[float] = field(default_factory=list)

    def median(self) -> float:
        return statistics.median(self.process)


def dbt_template(folder: Path, sql_template: Path) -> tuple[Path, float, float]:
    """The tidegate project controlling the benchmark's dbt project, built and deployed: its
    template, the seconds of the first build (dbt compile) and of the second (the cache). It is
    built where its runs will be (the compile cache is keyed on the dbt project's path), then
    moved aside as the template; every dbt test must have become a check."""
    root = folder / "dbt-run"
    root.mkdir()
    for name in ("warehouse.duckdb", "warehouse.duckdb.wal"):
        if (sql_template / name).exists():
            shutil.copy(sql_template / name, root / name)
    analytics = root / "analytics"
    # dbt-duckdb opens a relative path from the project folder, where tidegate runs dbt
    peers.dbt_project(analytics, Path("../warehouse.duckdb"), schema="main")
    (analytics / "models" / f"{MODEL}.yml").write_text(MODEL_YML)
    (analytics / "tests").mkdir()
    for name, test in SINGULAR_TESTS.items():
        (analytics / "tests" / f"{name}.sql").write_text(test)
    backfill.tidegate(["init", str(root), "--dbt", str(analytics)])
    compiling, _ = backfill.timed_process(["build", "--project", str(root)])
    cached, _ = backfill.timed_process(["build", "--project", str(root)])
    made = tidegate_json(["build", "--project", str(root)])["dbt"]
    if made["models"] != [MODEL] or made["left_to_dbt"] or made["tests_not_run"]:
        raise SystemExit(f"tidegate does not control the whole dbt project: {made}")
    backfill.tidegate(["deploy", MODEL, "--project", str(root)])
    template = folder / "dbt-template"
    root.rename(template)
    return template, compiling, cached


def tidegate_json(args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tidegate", *args, "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def checks_run(project: Path) -> str:
    """The checks and reconciliations tidegate ran on the project's first partition."""
    shown = tidegate_json(["show", "partition", MODEL, "2025-01-01", "--project", str(project)])[
        "published"
    ]
    checks = [f"{c['name']} ({c['kind']})" for c in shown["checks"]]
    reconciled = [r["name"] for r in shown["reconciliations"]]
    return ", ".join(checks) + (f"; reconciled: {', '.join(reconciled)}" if reconciled else "")


def backfill_once(side: Side, folder: Path, in_flight: int) -> Path:
    project = backfill.fresh_project(side.template, folder, side.run_name)
    wall, _ = backfill.timed_process(backfill.backfill_args(project, backfill.YEAR, 1, in_flight))
    side.process.append(wall)
    side.recorded.append(backfill.recorded_seconds(project))
    compile_log = project / COMPILE_LOG
    if compile_log.exists():
        before = (side.template / COMPILE_LOG).stat().st_mtime_ns
        if compile_log.stat().st_mtime_ns != before:
            raise SystemExit(f"{side.label}: the backfill compiled the dbt project again")
    return project / "warehouse.duckdb"


def literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def same_rows(left: tuple[Path, str], right: tuple[Path, str]) -> int:
    """The rows of two tables in two DuckDB files, which must be the same (as a multiset, every
    column): EXCEPT ALL both ways and equal counts. Returns the count."""
    columns = ", ".join(peers.COLUMNS)
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH {literal(left[0])} AS l (READ_ONLY)")
        con.execute(f"ATTACH {literal(right[0])} AS r (READ_ONLY)")
        one, other = f"SELECT {columns} FROM l.{left[1]}", f"SELECT {columns} FROM r.{right[1]}"
        row = con.execute(
            f"SELECT (SELECT count(*) FROM ({one})), (SELECT count(*) FROM ({other})), "
            f"(SELECT count(*) FROM ({one} EXCEPT ALL {other})), "
            f"(SELECT count(*) FROM ({other} EXCEPT ALL {one}))"
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    counted, counted_other, only_left, only_right = row
    if (counted, only_left, only_right) != (counted_other, 0, 0) or counted == 0:
        raise SystemExit(
            f"different outputs: {left[0]} {left[1]} has {counted} rows, {only_left} not in "
            f"{right[0]} {right[1]} ({counted_other} rows, {only_right} not in the first)"
        )
    return int(counted)


def main() -> None:
    parser = argparse.ArgumentParser(description="A dbt model's backfill through tidegate.")
    parser.add_argument("rows_per_day", nargs="?", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3, help="runs of each, median printed")
    parser.add_argument(
        "--max-concurrency", type=int, default=2, help="tidegate's batches in flight (default 2)"
    )
    args = parser.parse_args()
    rows_per_day: int = args.rows_per_day
    runs: int = args.runs
    in_flight: int = args.max_concurrency
    os.environ.setdefault(VENV_VARIABLE, str(SHARED_VENV))
    folder = Path(tempfile.mkdtemp(prefix="tidegate-bench-dbt-"))
    try:
        sql_template = backfill.reference_project(folder, rows_per_day)
        dbt_tpl, compiling, cached = dbt_template(folder, sql_template)
        sql = Side("tidegate SQL model", sql_template, "sql-run")
        dbt = Side("tidegate dbt model", dbt_tpl, "dbt-run")
        peer = peers.DBT
        version = peers.ensure_venv(peer)
        storage = peers.storage_version(peer)
        peer_seconds: list[float] = []
        rows = 0
        for run in range(runs):
            print(f"run {run + 1}/{runs}", file=sys.stderr)
            order = (sql, dbt) if run % 2 == 0 else (dbt, sql)
            outputs = {side.label: backfill_once(side, folder, in_flight) for side in order}
            peer_folder = folder / "peer"
            shutil.rmtree(peer_folder, ignore_errors=True)
            peer_folder.mkdir()
            seconds, database = peers.run_in(
                peer, peer_folder, sql_template / "warehouse.duckdb", storage, backfill.DAILY
            )
            peer_seconds.append(seconds)
            tidegate_sql = (outputs[sql.label], f"main.{MODEL}")
            tidegate_dbt = (outputs[dbt.label], f"main.{MODEL}")
            rows = same_rows(tidegate_dbt, tidegate_sql)
            same_rows(tidegate_dbt, (database, peers.DBT_TABLE))
        peer_median = statistics.median(peer_seconds)
        print(
            f"{365 * rows_per_day:,} orders, 365 daily partitions of {MODEL}, batch size 1; "
            f"median of {runs}; tidegate with --max-concurrency {in_flight}"
        )
        for side in (sql, dbt):
            print(f"{side.label} checks: {checks_run(folder / side.run_name)}")
        print(f"tidegate build, first (dbt compile)      {compiling:7.2f} s")
        print(f"tidegate build, second (compile cached)  {cached:7.2f} s")
        for side in (sql, dbt):
            print(
                f"{side.label + ' backfill':<40} {side.median():7.2f} s as a process, "
                f"{statistics.median(side.recorded):.2f} s run (ledger)  "
                f"[{', '.join(f'{s:.2f}' for s in side.process)}]"
            )
        print(
            f"{peer.label:<40} {peer_median:7.2f} s  ({version})  "
            f"[{', '.join(f'{s:.2f}' for s in peer_seconds)}]"
        )
        print(
            f"outputs verified: tidegate dbt model = tidegate SQL model = dbt-duckdb microbatch "
            f"({rows:,} rows each, EXCEPT ALL both ways, every run); dbt-duckdb ran 365 one-day "
            "batches"
        )
        ratio = dbt.median() / sql.median()
        print(
            f"ratio tidegate dbt model / tidegate SQL model: {ratio:5.2f}x "
            f"(claim: <= 1.3x: {'holds' if ratio <= 1.3 else 'does not hold'})"
        )
        faster = peer_median / dbt.median()
        print(
            f"ratio dbt-duckdb microbatch / tidegate dbt model: {faster:5.2f}x "
            f"(claim: >= 4x: {'holds' if faster >= 4 else 'does not hold'})"
        )
        print(
            f"ratio dbt-duckdb microbatch / tidegate SQL model: {peer_median / sql.median():5.2f}x"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
