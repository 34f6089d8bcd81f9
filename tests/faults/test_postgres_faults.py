"""G1 and G7 on a PostgreSQL warehouse, with real processes.

- kill -9 at every named crash point, then resume: no partition is ever half written (the
  table holds exactly the partitions that have a marker, each equal to the oracle), and the
  resumed result equals a clean run's, checksums included;
- one writer: while a writer holds the warehouse database, a second exits 4 at once and writes
  nothing, or with --wait proceeds once the first is gone;
- a server that cannot be reached is one line, exit 2, and never shows the password.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
from collections.abc import Iterator
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.engines.postgres_kit import fresh_database, postgres_project, rows, use_postgres
from tests.faults.ledger import (
    live_attempts,
    published_checksums,
    runs_with_status,
    wait_until,
)
from tests.kit import (
    FORCED,
    assert_exactly_once,
    example_project,
    run_process,
    spawn,
    state_dump,
)
from tidegate.crash import CRASH_POINTS, ENVIRONMENT_VARIABLE
from tidegate.engines.postgres import PostgresEngine
from tidegate.engines.postgres_connection import Warehouse

pytestmark = pytest.mark.postgres

FIRST, LAST = date(2025, 1, 1), date(2025, 1, 5)
RANGE = f"{FIRST}..{LAST}"
MODEL = "daily_revenue"
TIMEOUT = 60
ORACLE = (
    "SELECT CAST(order_ts AS DATE) AS d, status, count(*), sum(gross_amount), "
    "sum(gross_amount - discount - refund) FROM orders "
    "WHERE order_ts >= %s AND order_ts < %s GROUP BY 1, 2"
)
PUBLISHED = "SELECT order_date, status, order_count, gross_revenue, net_revenue FROM daily_revenue"


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_database() as found:
        yield found


@pytest.fixture
def project(tmp_path: Path, dsn: str) -> Path:
    return postgres_project(tmp_path / "proj", dsn)


def oracle(dsn: str, days: set[date]) -> list[tuple[Any, ...]]:
    found = rows(dsn, ORACLE, [FIRST, date(2025, 1, 6)])
    return [row for row in found if row[0] in days]


def marked_days(dsn: str) -> set[date]:
    starts = rows(
        dsn, "SELECT partition_start FROM _tidegate.commit_markers WHERE model = %s", [MODEL]
    )
    return {datetime.fromtimestamp(int(start[0]), timezone.utc).date() for start in starts}


def table_exists(dsn: str, name: str) -> bool:
    return bool(rows(dsn, "SELECT to_regclass(%s) IS NOT NULL", [name])[0][0])


@pytest.fixture(scope="module")
def clean_checksums(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Any]]:
    """Per-partition (rows, checksum) of an uninterrupted PostgreSQL run of the same range."""
    with fresh_database() as clean_dsn:
        clean = postgres_project(tmp_path_factory.mktemp("clean") / "proj", clean_dsn)
        result = run_process("run", MODEL, "--partition", RANGE, "--project", clean)
        assert result.exit_code == 0, result.stderr
        checksums = published_checksums(clean, MODEL)
        assert len(checksums) == 5
        yield checksums


@pytest.mark.crash
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_kill_at_crash_point_then_resume_is_exactly_once(
    point: str, project: Path, dsn: str, clean_checksums: dict[int, Any]
) -> None:
    command = ("run", MODEL, "--partition", RANGE, "--project", project)
    crashed = run_process(*command, env={ENVIRONMENT_VARIABLE: f"{point}:3"}, timeout=TIMEOUT)
    assert crashed.exit_code == -signal.SIGKILL, (crashed.exit_code, crashed.stderr)
    [crashed_run] = runs_with_status(project, "running")

    # no half-written partition: the table holds the marked partitions, each one whole
    marked = marked_days(dsn)
    unpublished = ("after_intent", "after_stage", "after_audit", "before_publish")
    assert len(marked) == (2 if point in unpublished else 3)
    assert_exactly_once(rows(dsn, PUBLISHED), oracle(dsn, marked))
    if point in ("after_stage", "after_audit", "before_publish"):
        # the dead writer's staging table is still there: nobody reads it
        assert rows(dsn, "SELECT count(*) FROM _tidegate_staging.daily_revenue__slot0")[0][0] > 0

    resumed = run_process(*command, "--json", timeout=TIMEOUT)
    assert resumed.exit_code == 0, resumed.stderr
    document = resumed.json()
    assert document["status"] == "succeeded" and document["published"] == 5
    assert document["recovered"]["runs_interrupted"] == [crashed_run]

    days = {date(2025, 1, d) for d in range(1, 6)}
    assert marked_days(dsn) == days
    assert_exactly_once(rows(dsn, PUBLISHED), oracle(dsn, days))
    assert rows(
        dsn,
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = '_tidegate_staging'",
    ) == [(0,)]
    assert published_checksums(project, MODEL) == clean_checksums
    assert live_attempts(project) == []
    # every ledger checksum is the one its marker carries
    ledger = published_checksums(project, MODEL)
    markers = rows(
        dsn,
        "SELECT DISTINCT ON (partition_start) partition_start, checksum "
        "FROM _tidegate.commit_markers WHERE model = %s "
        "ORDER BY partition_start, published_at DESC",
        [MODEL],
    )
    assert {int(s): c for s, c in markers} == {s: c for s, (_, c) in ledger.items()}


# --- one writer per warehouse ------------------------------------------------------------------


def hold(dsn: str) -> PostgresEngine:
    """This test process becomes the writer of the warehouse database."""
    return PostgresEngine(Warehouse(dsn))


def test_a_second_writer_exits_busy_at_once_and_writes_nothing(project: Path, dsn: str) -> None:
    before = state_dump(project)
    holder = hold(dsn)
    try:
        busy = run_process(
            "run", MODEL, "--partition", str(FIRST), "--project", project, timeout=20
        )
        after = state_dump(project)
    finally:
        holder.close()
    assert busy.exit_code == 4, (busy.stdout, busy.stderr)
    [line] = busy.stderr.splitlines()
    assert line.startswith("error: warehouse postgresql://") and "--wait" in line
    assert after == before
    assert not table_exists(dsn, "daily_revenue")
    # and once the holder is gone, the same command runs
    done = run_process("run", MODEL, "--partition", str(FIRST), "--project", project)
    assert done.exit_code == 0, done.stderr


def _lines(stream: Any, into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def test_a_waiting_writer_proceeds_once_the_warehouse_is_released(project: Path, dsn: str) -> None:
    lines: queue.Queue[str | None] = queue.Queue()
    holder = hold(dsn)
    try:
        process = spawn("run", MODEL, "--partition", str(FIRST), "--project", project, "--wait")
        reader = threading.Thread(target=_lines, args=(process.stderr, lines), daemon=True)
        reader.start()
        first = lines.get(timeout=TIMEOUT)
        assert first is not None and first.startswith("waiting for warehouse postgresql://")
        assert process.poll() is None
    finally:
        holder.close()
    try:
        code = process.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert code == 0
    assert marked_days(dsn) == {FIRST}
    assert_exactly_once(rows(dsn, PUBLISHED), oracle(dsn, {FIRST}))


def test_an_unreachable_warehouse_is_one_line_and_keeps_the_secret(tmp_path: Path) -> None:
    project = example_project(tmp_path / "proj", deploy=False)
    use_postgres(
        project, "postgresql://tidegate@127.0.0.1:1/nowhere", password_env="TG_WAREHOUSE_SECRET"
    )
    secret = {"TG_WAREHOUSE_SECRET": "sw0rdfish-never-shown"}
    for command in (("build",), ("deploy", MODEL), ("status", "--json")):
        result = run_process(*command, "--project", project, env=secret, timeout=TIMEOUT)
        assert "sw0rdfish" not in result.stdout + result.stderr
        if command[0] == "deploy":
            assert result.exit_code == 2, result.stderr
            [line] = result.stderr.splitlines()
            assert line.startswith("error: cannot connect to warehouse postgresql://tidegate@")
            assert "Traceback" not in result.stderr
        else:
            # build and status read the project and the ledger only; a deploy's preflight
            # opens the warehouse
            assert result.exit_code == 0, result.stderr
    stored = b"".join(p.read_bytes() for p in (project / ".tidegate").rglob("*") if p.is_file())
    assert b"sw0rdfish" not in stored


# --- Ctrl-C inside a query -------------------------------------------------------------------


def _published_and_staging(project: Path) -> bool | None:
    running = [a for a in live_attempts(project) if a[2] == "running"]
    return True if running and published_checksums(project, MODEL) else None


@pytest.mark.crash
def test_ctrl_c_inside_a_query_cancels_it_exits_130_and_resumes_exactly_once(
    project: Path, dsn: str
) -> None:
    """The model is made slow (an uncorrelated subquery that sleeps, changing no result), so
    SIGINT lands while PostgreSQL runs it: the statement is cancelled, the run closed."""
    model = project / "models" / f"{MODEL}.sql"
    window = "WHERE order_ts >= $start AND order_ts < $end"
    slow = f"{window} AND (SELECT CAST(pg_sleep(1) AS VARCHAR)) IS NOT NULL"
    model.write_text(model.read_text().replace(window, slow))
    assert run_process("build", "--project", project).exit_code == 0
    deployed = run_process("deploy", MODEL, *FORCED, "--project", project)
    assert deployed.exit_code == 0, deployed.stderr

    command = ("run", MODEL, "--partition", RANGE, "--project", project)
    process = spawn(*command)
    try:
        wait_until(
            "a published partition and one being staged", lambda: _published_and_staging(project)
        )
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    except BaseException:
        process.kill()
        process.communicate(timeout=TIMEOUT)
        raise
    assert process.returncode == 130, (process.returncode, stdout, stderr)
    assert stderr.strip() == "interrupted"
    assert 1 <= len(marked_days(dsn)) < 5
    assert rows(
        dsn,
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep%' "
        "AND pid <> pg_backend_pid()",
    ) == [(0,)]

    resumed = run_process(*command, "--json", timeout=TIMEOUT)
    assert resumed.exit_code == 0, resumed.stderr
    days = {date(2025, 1, d) for d in range(1, 6)}
    assert marked_days(dsn) == days
    assert_exactly_once(rows(dsn, PUBLISHED), oracle(dsn, days))
    assert live_attempts(project) == []
