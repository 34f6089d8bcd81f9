"""Ctrl-C in the middle of a run: exit 130, and a new run of the same range is exactly once."""

from __future__ import annotations

import signal
from datetime import date
from pathlib import Path

import pytest

from tests.faults.ledger import (
    assert_ledger_matches_markers,
    ledger_rows,
    live_attempts,
    oracle_between,
    published_checksums,
    wait_until,
)
from tests.kit import (
    FORCED,
    assert_exactly_once,
    assert_no_staging,
    published_daily_revenue,
    run_process,
    spawn,
    tidegate,
)

MODEL = "daily_revenue"
FIRST, LAST = date(2025, 1, 1), date(2025, 3, 31)
RANGE = f"{FIRST}..{LAST}"
DAYS = 90


def _published_count(project: Path) -> int | None:
    [(count,)] = ledger_rows(
        project,
        "SELECT count(*) FROM partitions WHERE model = ? AND attempt_id IS NOT NULL",
        (MODEL,),
    )
    return count or None


def _staging(project: Path) -> bool | None:
    [(running,)] = ledger_rows(project, "SELECT count(*) FROM attempts WHERE state = 'running'")
    return True if running and _published_count(project) else None


@pytest.mark.crash
def test_ctrl_c_exits_130_and_a_new_run_is_exactly_once(project: Path) -> None:
    process = spawn("run", MODEL, "--partition", RANGE, "--project", project)
    try:
        wait_until("the first published partition", lambda: _published_count(project))
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    except BaseException:
        process.kill()
        process.communicate(timeout=30)
        raise
    assert process.returncode == 130, (process.returncode, stdout, stderr)
    assert "interrupted" in stderr
    # it really stopped part-way: some partitions published, not all
    assert 1 <= len(published_checksums(project, MODEL)) < DAYS
    [(status, reason)] = ledger_rows(project, "SELECT status, reason FROM runs")
    assert status == "interrupted", reason

    resumed = run_process("run", MODEL, "--partition", RANGE, "--project", project, "--json")
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.json()["published"] == DAYS
    # the interrupted run was already closed by its own process: nothing to mark again
    assert resumed.json()["recovered"]["runs_interrupted"] == []

    oracle = oracle_between(project, FIRST, LAST)
    assert len({row[0] for row in oracle}) == DAYS
    assert_exactly_once(published_daily_revenue(project), oracle)
    assert_no_staging(project)
    assert live_attempts(project) == []
    assert assert_ledger_matches_markers(project, MODEL) == DAYS


@pytest.mark.crash
def test_ctrl_c_inside_a_warehouse_query_exits_130_and_closes_the_run(project: Path) -> None:
    """The same, with the interrupt landing while DuckDB executes the model's query.

    The model is made slow (an uncorrelated scalar subquery that changes no result), so that
    the process spends nearly all its time inside DuckDB when SIGINT arrives.
    """
    model = project / "models" / f"{MODEL}.sql"
    text = model.read_text()
    window = "WHERE order_ts >= $start AND order_ts < $end"
    assert text.count(window) == 1
    slow = f"{window} AND (SELECT sum(hash(i)) FROM range(100000000) AS r(i)) IS NOT NULL"
    model.write_text(text.replace(window, slow))
    assert tidegate("build", "--project", project).exit_code == 0
    deployed = tidegate("deploy", MODEL, *FORCED, "--project", project)
    assert deployed.exit_code == 0, deployed.stderr

    last = date(2025, 1, 5)
    command = ("run", MODEL, "--partition", f"{FIRST}..{last}", "--project", project)
    process = spawn(*command)
    try:
        # a partition in state "running" is being staged: DuckDB runs the slow query now
        wait_until("a published partition and one being staged", lambda: _staging(project))
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    except BaseException:
        process.kill()
        process.communicate(timeout=30)
        raise
    assert process.returncode == 130, (process.returncode, stdout, stderr)
    assert stderr.strip() == "interrupted"
    assert 1 <= len(published_checksums(project, MODEL)) < 5
    [(status, reason)] = ledger_rows(project, "SELECT status, reason FROM runs")
    assert status == "interrupted", reason

    resumed = run_process(*command, "--json")
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.json()["recovered"]["runs_interrupted"] == []
    assert_exactly_once(published_daily_revenue(project), oracle_between(project, FIRST, last))
    assert_no_staging(project)
    assert live_attempts(project) == []
