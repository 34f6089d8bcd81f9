"""The reference backfill through peer tools, for `backfill.py --peers`.

Each peer is installed once into its own virtual environment under
~/.cache/tidegate-bench/venvs (reused while its pinned requirements are unchanged), then runs
daily_revenue over the 365 days of 2025 from a fresh copy of the warehouse, once per run, in a
temporary project:
  - SQLMesh: INCREMENTAL_BY_TIME_RANGE on order_date, batch_size 1, cron @daily, one not_null
    audit. `sqlmesh plan --skip-backfill` deploys the model untimed (as `tidegate deploy` is);
    the timed command is `sqlmesh run`, which executes the 365 missing daily intervals.
  - dbt-duckdb: an incremental microbatch model, batch_size day, its source filtered per batch
    through event_time; the timed command is `dbt run --event-time-start 2025-01-01
    --event-time-end 2026-01-01`.
Each timed command includes its process start. After every run the peer's log must show 365
one-day batches and its table must equal the same GROUP BY over the whole year computed
directly in DuckDB; otherwise the peer gets no time, only the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import duckdb

VENVS = Path.home() / ".cache" / "tidegate-bench" / "venvs"
DAYS = 365
YEAR = {"start": datetime(2025, 1, 1), "end": datetime(2026, 1, 1)}
# The peers' model, the same query as backfill.DAILY without its partition filter.
SELECT = """SELECT
  CAST(order_ts AS DATE) AS order_date,
  status,
  count(*) AS order_count,
  CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross_revenue,
  CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue
FROM {source}
{where}GROUP BY CAST(order_ts AS DATE), status
"""
COLUMNS = ("order_date", "status", "order_count", "gross_revenue", "net_revenue")
SQLMESH_TABLE = "sqlmesh_bench.daily_revenue"
DBT_TABLE = "dbt_bench.daily_revenue"


class PeerError(Exception):
    """A peer could not be installed, failed, or produced a wrong result."""


@dataclass(frozen=True)
class Peer:
    name: str
    label: str
    folder: str
    requirements: tuple[str, ...]
    package: str
    table: str
    write_project: Callable[[Path, Path], None]
    # Untimed set-up (the deploy), then the timed backfill: arguments after the executable.
    executable: str
    setup: tuple[str, ...]
    backfill: tuple[str, ...]
    # The day of each one-day batch the timed command's output reports as done.
    batch: str

    @property
    def venv(self) -> Path:
        return VENVS / self.folder

    @property
    def bin(self) -> Path:
        return self.venv / "bin"


@dataclass
class PeerResult:
    peer: Peer
    version: str = ""
    seconds: list[float] = field(default_factory=list)
    problem: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds and not self.problem else None


def default_runs(rows_per_day: int) -> int:
    """Three runs each, one when a run takes minutes."""
    return 3 if rows_per_day <= 50_000 else 1


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["(no output)"])[-1]


def ensure_venv(peer: Peer) -> str:
    """Install the peer into its own venv unless already there; return its versions."""
    stamp = peer.venv / ".tidegate-bench-requirements"
    wanted = "\n".join(peer.requirements)
    if not (stamp.exists() and stamp.read_text() == wanted):
        shutil.rmtree(peer.venv, ignore_errors=True)
        print(f"installing {' '.join(peer.requirements)} into {peer.venv}", file=sys.stderr)
        VENVS.mkdir(parents=True, exist_ok=True)
        steps = (
            [sys.executable, "-m", "venv", str(peer.venv)],
            [str(peer.bin / "python"), "-m", "pip", "install", "--quiet", *peer.requirements],
        )
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True)
            if done.returncode != 0:
                shutil.rmtree(peer.venv, ignore_errors=True)
                raise PeerError(f"install failed: {last_line(done.stderr + done.stdout)}")
        stamp.write_text(wanted)
    package, engine = peer_python(
        peer,
        "from importlib.metadata import version; "
        f"print(version({peer.package!r}), version('duckdb'))",
    ).split()
    return f"{peer.package} {package}, duckdb {engine}"


def peer_python(peer: Peer, code: str) -> str:
    """What a snippet prints in the peer's venv."""
    done = subprocess.run([str(peer.bin / "python"), "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise PeerError(f"broken venv {peer.venv}: {last_line(done.stderr)}")
    return done.stdout.strip()


def storage_version(peer: Peer) -> str | None:
    """The storage version the peer's DuckDB reads, when older than ours (None: same)."""
    version = peer_python(peer, "import duckdb; print(duckdb.__version__)")
    theirs = tuple(int(part) for part in version.split(".")[:2])
    ours = tuple(int(part) for part in duckdb.__version__.split(".")[:2])
    return f"v{theirs[0]}.{theirs[1]}.0" if theirs < ours else None


def copy_warehouse(warehouse: Path, target: Path, storage: str | None) -> None:
    """A copy of the warehouse, rewritten in an older storage format when the peer needs it."""
    if storage is None:
        shutil.copy(warehouse, target)
        wal = warehouse.with_name(warehouse.name + ".wal")
        if wal.exists():
            shutil.copy(wal, target.with_name(target.name + ".wal"))
        return

    def literal(path: Path) -> str:
        return "'" + str(path).replace("'", "''") + "'"

    con = duckdb.connect()
    try:
        con.execute(f"ATTACH {literal(warehouse)} AS source (READ_ONLY)")
        con.execute(f"ATTACH {literal(target)} AS target (STORAGE_VERSION '{storage}')")
        con.execute("COPY FROM DATABASE source TO target")
    finally:
        con.close()


def sqlmesh_project(project: Path, database: Path) -> None:
    (project / "models").mkdir(parents=True)
    (project / "config.yaml").write_text(
        "gateways:\n"
        "  local:\n"
        "    connection:\n"
        "      type: duckdb\n"
        f"      database: '{database}'\n"
        "      concurrent_tasks: 1\n"
        "default_gateway: local\n"
        "model_defaults:\n"
        "  dialect: duckdb\n"
        "disable_anonymized_analytics: true\n"
    )
    header = (
        "MODEL (\n"
        f"  name {SQLMESH_TABLE},\n"
        "  kind INCREMENTAL_BY_TIME_RANGE (time_column order_date, batch_size 1),\n"
        "  cron '@daily',\n"
        "  start '2025-01-01',\n"
        "  end '2025-12-31',\n"
        "  grain (order_date, status),\n"
        "  audits (not_null(columns := (order_date, status)))\n"
        ");\n\n"
    )
    body = SELECT.format(
        source="main.orders", where="WHERE order_ts >= @start_ts AND order_ts <= @end_ts\n"
    )
    (project / "models" / "daily_revenue.sql").write_text(header + body)


def dbt_project(project: Path, database: Path, schema: str = DBT_TABLE.split(".")[0]) -> None:
    """The dbt-duckdb microbatch project, building into `schema` of the DuckDB file `database`
    (as dbt-duckdb opens it: a relative path from the project folder)."""
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: bench\n"
        "version: '1.0'\n"
        "config-version: 2\n"
        "profile: bench\n"
        "model-paths: ['models']\n"
        "flags:\n"
        "  send_anonymous_usage_stats: false\n"
    )
    (project / "profiles.yml").write_text(
        "bench:\n"
        "  target: bench\n"
        "  outputs:\n"
        "    bench:\n"
        "      type: duckdb\n"
        f"      path: '{database}'\n"
        f"      schema: {schema}\n"
        "      threads: 1\n"
    )
    (project / "models" / "sources.yml").write_text(
        "version: 2\n"
        "sources:\n"
        "  - name: raw\n"
        "    schema: main\n"
        "    tables:\n"
        "      - name: orders\n"
        "        config:\n"
        "          event_time: order_ts\n"
    )
    config = (
        "{{ config(\n"
        "    materialized='incremental',\n"
        "    incremental_strategy='microbatch',\n"
        "    event_time='order_date',\n"
        "    batch_size='day',\n"
        "    begin='2025-01-01',\n"
        ") }}\n"
    )
    body = SELECT.format(source="{{ source('raw', 'orders') }}", where="")
    (project / "models" / "daily_revenue.sql").write_text(config + body)


SQLMESH = Peer(
    name="SQLMesh",
    label="SQLMesh, batch 1 + not_null audit",
    folder="sqlmesh",
    requirements=("sqlmesh", "duckdb<2"),
    package="sqlmesh",
    table=SQLMESH_TABLE,
    write_project=sqlmesh_project,
    executable="sqlmesh",
    setup=("plan", "--auto-apply", "--no-prompts", "--skip-backfill"),
    backfill=("run",),
    batch=r"\[insert\s+(\d{4}-\d\d-\d\d)\s+-\s+\1,\s+audits\s+passed\s+1\]",
)
DBT = Peer(
    name="dbt-duckdb",
    label="dbt-duckdb, microbatch by day",
    folder="dbt",
    requirements=("dbt-core<1.12", "dbt-duckdb"),
    package="dbt-core",
    table=DBT_TABLE,
    write_project=dbt_project,
    executable="dbt",
    setup=(),
    backfill=(
        "run",
        "--project-dir",
        ".",
        "--profiles-dir",
        ".",
        "--no-use-colors",
        "--event-time-start",
        "2025-01-01",
        "--event-time-end",
        "2026-01-01",
    ),
    batch=r"Batch \d+ of \d+ OK created batch (\d{4}-\d\d-\d\d) ",
)
PEERS = (SQLMESH, DBT)


def peer_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    # No telemetry (this machine reaches no analytics host), no colours, no wrapped lines.
    env.update({"DO_NOT_TRACK": "1", "NO_COLOR": "1", "COLUMNS": "200"})
    return env


def timed(command: list[str], cwd: Path, log: Path) -> tuple[float, str]:
    """Wall time and output of one peer command, its process start included.

    No peak memory: a child's ru_maxrss on Linux starts from this process's RSS (the
    vfork+exec inherits its high-water mark), which holds DuckDB buffers from verifying.
    """
    with log.open("w") as out:
        began = time.perf_counter()
        done = subprocess.run(command, cwd=cwd, env=peer_env(), stdout=out, stderr=out)
        seconds = time.perf_counter() - began
    output = log.read_text()
    if done.returncode != 0:
        raise PeerError(f"{Path(command[0]).name} {command[1]} failed: {last_line(output)}")
    return seconds, output


def verify(peer: Peer, database: Path, reference: str, output: str) -> None:
    """The peer ran 365 one-day batches and its table equals the year's GROUP BY."""
    days = re.findall(peer.batch, output)
    if len(days) != DAYS or len(set(days)) != DAYS:
        raise PeerError(f"wrong run: {len(set(days))} distinct daily batches, expected {DAYS}")
    columns = ", ".join(COLUMNS)
    keys = " AND ".join(f"e.{c} IS NOT DISTINCT FROM a.{c}" for c in COLUMNS[:2])
    differs = " OR ".join(f"e.{c} IS DISTINCT FROM a.{c}" for c in COLUMNS[2:])
    con = duckdb.connect(str(database), read_only=True)
    try:
        con.execute("CREATE TEMP TABLE expected AS " + reference, YEAR)
        con.execute(f"CREATE TEMP TABLE actual AS SELECT {columns} FROM {peer.table}")
        row = con.execute(
            "SELECT (SELECT count(*) FROM actual), (SELECT count(*) FROM expected), "
            "(SELECT count(*) FROM expected e FULL OUTER JOIN actual a ON " + keys + " WHERE "
            "e.order_date IS NULL OR a.order_date IS NULL OR " + differs + "), "
            "(SELECT count(*) FROM (SELECT * FROM expected EXCEPT ALL SELECT * FROM actual)), "
            "(SELECT count(*) FROM (SELECT * FROM actual EXCEPT ALL SELECT * FROM expected))"
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    actual, expected, joined, missing, extra = row
    if (actual, joined, missing, extra) != (expected, 0, 0, 0):
        raise PeerError(
            f"wrong output: {actual} rows for {expected} expected, {joined} differing on "
            f"(order_date, status), {missing} missing, {extra} extra"
        )


def run_in(
    peer: Peer, folder: Path, warehouse: Path, storage: str | None, reference: str
) -> tuple[float, Path]:
    """One verified run in `folder` (empty): its seconds and the DuckDB file it built into."""
    project = folder / "project"
    database = folder / "warehouse.duckdb"
    copy_warehouse(warehouse, database, storage)
    log = folder / "output.log"
    peer.write_project(project, database)
    executable = str(peer.bin / peer.executable)
    if peer.setup:
        timed([executable, *peer.setup], project, log)
    # as for tidegate's runs: no timed run pays for writing the copy out
    os.sync()
    seconds, output = timed([executable, *peer.backfill], project, log)
    verify(peer, database, reference, output)
    return seconds, database


def run_once(peer: Peer, warehouse: Path, storage: str | None, reference: str) -> float:
    with tempfile.TemporaryDirectory(prefix=f"tidegate-peer-{peer.folder}-") as folder:
        return run_in(peer, Path(folder), warehouse, storage, reference)[0]


def run_peer(peer: Peer, warehouse: Path, runs: int, reference: str) -> PeerResult:
    result = PeerResult(peer)
    try:
        result.version = ensure_venv(peer)
        storage = storage_version(peer)
        for run in range(runs):
            print(f"{peer.name} run {run + 1}/{runs}", file=sys.stderr)
            result.seconds.append(run_once(peer, warehouse, storage, reference))
    except (PeerError, OSError, duckdb.Error) as error:
        result.problem = str(error)
    return result


def run_peers(warehouse: Path, runs: int, reference: str) -> dict[str, PeerResult]:
    """Each peer's runs over the warehouse's orders; `reference` is backfill.DAILY."""
    return {peer.name: run_peer(peer, warehouse, runs, reference) for peer in PEERS}


def report(results: dict[str, PeerResult], tidegate_batch1: float, same_work: float) -> list[str]:
    """Lines for backfill.py: each peer's median, its ratio to tidegate batch 1, and its ratio
    to the raw DuckDB loop doing the same work (what any tool's ratio is bounded by)."""
    lines = []
    for name, result in results.items():
        median = result.median
        if median is None:
            lines.append(f"{result.peer.label:<38} not compared: {result.problem}")
            continue
        runs = len(result.seconds)
        lines.append(
            f"{result.peer.label:<38} {median:7.2f} s  "
            f"(median of {runs}, {result.version}, output verified)"
        )
        ratio = median / tidegate_batch1
        faster = ratio >= 1
        verdict = (
            f"tidegate is {ratio if faster else 1 / ratio:.1f}x {'faster' if faster else 'slower'}"
        )
        lines.append(f"ratio {name} / tidegate batch 1: {ratio:5.2f}x ({verdict})")
        lines.append(
            f"ratio {name} / raw loop doing the same work: {median / same_work:5.2f}x "
            "(the physical limit of that ratio)"
        )
    return lines
