"""PostgreSQL connection loss mid-operation: a backfill is stopped (SIGSTOP) at a crash point,
its own sessions (application_name 'tidegate') are terminated with pg_terminate_backend — the
server stays up — and it is continued. It retries or ends with one clear line and exit 1 (the
operation failed; neither store is unusable); the stores are never inconsistent, and a resume
finishes like a clean run."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.harness import MODEL, Partitions, assert_consistent, assert_converged
from tests.chaos.stores import Stores
from tests.distributed.kit import shared_project
from tests.engines.postgres_kit import admin, fresh_database, postgres_project
from tests.faults.backfill_kit import running
from tests.faults.ledger import wait_until
from tests.kit import run_process, tidegate
from tidegate.crash import ENVIRONMENT_VARIABLE, SIGNAL_VARIABLE

pytestmark = [pytest.mark.postgres, pytest.mark.crash]

RANGE = "2025-01-01..2025-01-06"


def stopped(pid: int) -> bool | None:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return True if stat.rsplit(")", 1)[1].split()[0] == "T" else None


def terminate_tidegate_sessions(dsn: str) -> int:
    """pg_terminate_backend every session tidegate holds on this database: its own, found by
    application_name, never the server's nor this test's."""
    with admin(dsn) as con:
        found = con.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 'tidegate' "
            "AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(found[0]) if found else 0


def oracle_partitions(stores: Stores) -> Partitions:
    """daily_revenue over RANGE computed independently, by a GROUP BY over the orders."""
    found: Partitions = {}
    for row in stores.warehouse(
        "SELECT CAST(order_ts AS DATE), status, count(*), sum(gross_amount), "
        "sum(gross_amount - discount - refund) FROM orders "
        "WHERE order_ts >= '2025-01-01' AND order_ts < '2025-01-07' GROUP BY 1, 2"
    ):
        found.setdefault(row[0], Counter())[tuple(row)] += 1
    return found


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_database() as found:
        yield found


@pytest.mark.parametrize("ledger", ["sqlite", "postgres"])
@pytest.mark.parametrize("point", ["after_stage", "after_publish"])
def test_sessions_terminated_mid_backfill(
    ledger: str, point: str, dsn: str, tmp_path: Path
) -> None:
    if ledger == "postgres":
        project = shared_project(tmp_path / "proj", dsn, rows_per_day=4)
        stores = Stores(project, warehouse_dsn=dsn, ledger_dsn=dsn)
    else:
        project = postgres_project(tmp_path / "proj", dsn, rows_per_day=4)
        stores = Stores(project, warehouse_dsn=dsn)
    command = ("backfill", MODEL, "--partitions", RANGE, "--batch-size", "1")
    env = {ENVIRONMENT_VARIABLE: f"{point}:2", SIGNAL_VARIABLE: "SIGSTOP"}
    with running(*command, "--project", project, env=env) as process:
        wait_until("the backfill stops at the point", lambda: stopped(process.pid), 60)
        assert terminate_tidegate_sessions(dsn) >= 1
        process.send_signal(signal.SIGCONT)
        result = process.finish(60)
    if result.exit_code != 0:  # not retried: the operation failed (1), in one clear line
        assert result.exit_code == 1, result
        lines = result.stderr.strip().splitlines()
        assert lines and lines[-1].startswith("error: "), result.stderr
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr, (
            result.stderr
        )
    oracle = oracle_partitions(stores)
    assert_consistent(stores, [oracle], "after the sessions were terminated")
    [(run_id,)] = stores.ledger("SELECT run_id FROM runs ORDER BY run_id DESC LIMIT 1")
    [(status,)] = stores.ledger("SELECT status FROM runs WHERE run_id = ?", [run_id])
    if status != "succeeded":
        resumed = run_process("backfill", "resume", run_id, "--project", project, timeout=60)
        assert resumed.exit_code == 0, resumed.stderr
    done = tidegate("show", "run", run_id, "--project", project, "--json")
    assert done.json()["status"] == "succeeded", done.stdout
    assert len(oracle) == 6
    checksums = {
        int(s): c
        for s, c in stores.ledger(
            "SELECT partition_start, checksum FROM partitions WHERE attempt_id IS NOT NULL "
            "AND model = ?",
            [MODEL],
        )
    }
    assert_converged(stores, oracle, checksums, "after the resume")
