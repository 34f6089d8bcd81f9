"""G1 on Spark: SIGKILL a real `tidegate backfill` on a Spark warehouse at the publish's crash
points, resume it, and compare with a clean run.

after_audit kills the process before its publish wrote anything; after_publish right after
the catalog switched the partition's pointer and inserted its marker, before the ledger heard
of it. The resume (in this test process, on its Spark session) reconciles the attempt left
pending from the catalog's markers and publishes the rest; the tables an outside reader sees
through the pointers and the ledger's checksums then equal a clean run's.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.engines.spark_kit import LOCATION, published_rows, spark_project
from tests.faults.backfill_kit import json_events, listed_backfills
from tests.faults.ledger import live_attempts, published_checksums
from tests.kit import run_process, tidegate
from tidegate.crash import ENVIRONMENT_VARIABLE

pytestmark = [pytest.mark.spark, pytest.mark.crash, pytest.mark.xdist_group("spark")]

MODEL = "daily_revenue"
COLUMNS = "order_date, status, order_count, gross_revenue, net_revenue"
RANGE = "2025-01-01..2025-01-04"
COMMAND = ("backfill", MODEL, "--partitions", RANGE, "--batch-size", "1", "--max-concurrency", "1")
RECOVERED = {"after_audit": "failed", "after_publish": "published"}


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    """The ledger's checksums and the published rows of an uninterrupted run."""
    project = spark_project(tmp_path_factory.mktemp("clean") / "proj")
    result = tidegate(*COMMAND, "--project", project)
    assert result.exit_code == 0, result.stderr
    return published_checksums(project, MODEL), published_rows(project / LOCATION, MODEL, COLUMNS)


@pytest.mark.parametrize("point", sorted(RECOVERED))
def test_kill_a_spark_backfill_then_resume_is_a_clean_run(
    point: str, tmp_path: Path, clean: tuple[Any, Any]
) -> None:
    project = spark_project(tmp_path / "proj")
    crashed = run_process(
        *COMMAND, "--project", project, env={ENVIRONMENT_VARIABLE: f"{point}:3"}, timeout=240
    )
    assert crashed.exit_code == -signal.SIGKILL, (crashed.exit_code, crashed.stderr)
    [pending] = live_attempts(project)
    assert len(published_checksums(project, MODEL)) == 2

    [listed] = listed_backfills(project)
    resumed = tidegate("backfill", "resume", listed["run_id"], "--project", project, "--json")
    assert resumed.exit_code == 0, resumed.stderr
    events = json_events(resumed.stdout)
    assert events[-1]["status"] == "succeeded"
    redone = [e["partition"] for e in events if e["event"] == "partition"]
    # a publish the catalog holds is not redone: its marker settles the attempt
    assert len(redone) == (1 if RECOVERED[point] == "published" else 2)

    checksums, rows = clean
    assert published_checksums(project, MODEL) == checksums
    assert published_rows(project / LOCATION, MODEL, COLUMNS) == rows
    assert live_attempts(project) == []
    shown = tidegate("show", "run", listed["run_id"], "--project", project, "--json")
    states = {a["attempt_id"]: a["state"] for a in shown.json()["attempts"]}
    assert states[pending[0]] == RECOVERED[point]
