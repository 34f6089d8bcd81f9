"""Several tidegate processes at once on one embedded project, and the ledger's write lock held
by another process: every writer ends done, busy (exit 4) or waiting its turn with --wait,
`status` and the UI read throughout, and the stores are never left inconsistent.

Overlapping backfills, reruns and recoveries start together; the warehouse admits one writer
process at a time (docs/design.md §7), so the others wait (--wait) or exit 4 having written
nothing."""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
import urllib.request
from pathlib import Path

import pytest

from tests.chaos.harness import MODEL, assert_consistent, assert_converged
from tests.chaos.projects import RANGE, Fixtures, build_fixtures
from tests.chaos.stores import Stores
from tests.faults.backfill_kit import Process, running
from tests.faults.ledger import wait_until
from tests.kit import free_port, listening, run_process, state_dump
from tests.state.contract import V1
from tidegate.domain.errors import BusyError
from tidegate.state.sqlite import SQLiteStateStore

pytestmark = [pytest.mark.crash, pytest.mark.duckdb]


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> Fixtures:
    return build_fixtures(tmp_path_factory.mktemp("concurrency"))


def writers(project: Path, buggy_run: str, *wait: str) -> list[tuple[str, ...]]:
    """Overlapping writers over RANGE (2025-01-01..12) of daily_revenue."""
    at = ("--project", str(project), *wait)
    return [
        ("backfill", MODEL, "--partitions", "2025-01-01..2025-01-08", "--batch-size", "1", *at),
        ("backfill", MODEL, "--partitions", "2025-01-05..2025-01-12", "--batch-size", "2", *at),
        ("rerun", buggy_run, "--partitions", "2025-01-03..2025-01-10", "--approve", "x", *at),
        ("recover", MODEL, "--batch-size", "1", *at),
    ]


def status_reads(project: Path, port: int, stop: threading.Event, failures: list[str]) -> None:
    """`status --json` and the UI's /api/status, in turn, until stopped; what failed."""
    while not stop.is_set():
        read = run_process("status", "--project", project, "--json", timeout=60)
        if read.exit_code != 0 or not read.json()["models"]:
            failures.append(read.stderr)
        url = f"http://127.0.0.1:{port}/api/status"
        with urllib.request.urlopen(url, timeout=30) as answer:
            if answer.status != 200 or not json.loads(answer.read())["models"]:
                failures.append(f"ui answered {answer.status}")


@pytest.mark.parametrize("wait", [True, False], ids=["wait", "busy"])
def test_overlapping_writers_with_status_reading_throughout(
    wait: bool, fixtures: Fixtures, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    shutil.copytree(fixtures.buggy, project)
    taint = run_process(
        "taint",
        MODEL,
        "--partitions",
        "2025-01-01..2025-01-04",
        "--reason",
        "refunds",
        "--project",
        project,
    )
    assert taint.exit_code == 0, taint.stderr
    stores = Stores(project)
    [(runs_before,)] = stores.ledger("SELECT count(*) FROM runs")
    stop, failures = threading.Event(), []
    port = free_port()
    with running("ui", "--port", str(port), "--project", project) as ui:
        wait_until("the UI listens", lambda: listening(port), 30)
        reader = threading.Thread(target=status_reads, args=(project, port, stop, failures))
        reader.start()
        commands = writers(project, fixtures.buggy_run, *(["--wait"] if wait else []))
        processes = [Process(*argv) for argv in commands]  # all started at once
        try:
            results = [process.finish(120) for process in processes]
        finally:
            for process in processes:
                process.kill()
            stop.set()
            reader.join(60)
        assert ui.alive(), "the UI died while the writers ran"
    assert failures == [], failures
    codes = [r.exit_code for r in results]
    for result in results:
        if result.exit_code == 2:  # a rerun ran first and its publishes cleared the taint
            assert "nothing to recover" in result.stderr, result.stderr
            continue
        assert result.exit_code in ((0,) if wait else (0, 4)), result.stderr
        if result.exit_code == 4:
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert "in use by another tidegate process" in result.stderr, result.stderr
    assert 0 in codes
    # a writer that was busy or had nothing to do recorded no run: only the others did
    [(runs_after,)] = stores.ledger("SELECT count(*) FROM runs")
    assert runs_after - runs_before == codes.count(0), codes
    assert_consistent(stores, [fixtures.clean, fixtures.wrong], f"after {codes}")
    # and whatever did not run then runs now: the range ends as a clean run's
    for argv in commands[:2]:
        assert run_process(*argv, timeout=120).exit_code == 0
    rerun = run_process(*commands[2], timeout=120)
    assert rerun.exit_code == 0, rerun.stderr
    recover = run_process(*commands[3], timeout=120)
    assert recover.exit_code in (0, 2), recover.stderr  # 2: nothing left tainted to recover
    assert_converged(stores, fixtures.clean, fixtures.checksums, "after the overlap")


def hold_write_lock(path: Path) -> sqlite3.Connection:
    """Another process's write transaction on the ledger (this test process is that one)."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO events (kind, actor, at) VALUES ('held', 'test', 'now')")
    return holder


def test_a_ledger_locked_for_a_while_is_waited_for(fixtures: Fixtures, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    shutil.copytree(fixtures.fresh, project)
    holder = hold_write_lock(project / ".tidegate" / "state.db")
    release = threading.Timer(1.5, lambda: holder.execute("ROLLBACK"))
    release.start()
    try:
        done = run_process("backfill", MODEL, "--partitions", RANGE, "--project", project)
    finally:
        release.join()
        holder.close()
    assert done.exit_code == 0, done.stderr
    assert_converged(Stores(project), fixtures.clean, fixtures.checksums, "after the wait")


def test_a_ledger_locked_past_the_busy_timeout_is_busy_and_changes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    SQLiteStateStore(path).close()
    store = SQLiteStateStore(path, busy_timeout_ms=100)
    holder = hold_write_lock(path)
    try:
        with pytest.raises(BusyError) as raised:
            store.save_version(V1)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    message = str(raised.value)
    assert raised.value.exit_code == 4 and len(message.splitlines()) == 1
    assert str(path) in message and "locked by another process" in message
    assert store.get_version(V1.version_id) is None
    store.save_version(V1)  # once the lock is gone, the same call goes through
    assert store.get_version(V1.version_id) == V1
    store.close()


def test_a_ledger_locked_when_a_command_starts_is_busy_not_corrupt(
    fixtures: Fixtures, tmp_path: Path
) -> None:
    """Opening the ledger waits for the lock too; past the timeout the command says busy, not
    'unreadable, restore a backup' (the file is fine)."""
    project = tmp_path / "proj"
    shutil.copytree(fixtures.fresh, project)
    before = state_dump(project)
    holder = sqlite3.connect(project / ".tidegate" / "state.db", isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        store_path = project / ".tidegate" / "state.db"
        with pytest.raises(BusyError):
            SQLiteStateStore(store_path, busy_timeout_ms=100)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert state_dump(project) == before
