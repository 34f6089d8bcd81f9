"""The Airflow 3 provider, run for real: Airflow 3.3 in a virtual environment of its own (installed
on first use), `airflow dags test` of the example DAG and of the scenarios' DAGs against demo
projects, and what they left in Airflow's metadata DB: task states and tries, asset events and
their partition keys, XCom."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path
from typing import IO, Any

import duckdb
import pytest

from tests.airflow.kit import EXAMPLE_DAGS, TEST_DAGS, Airflow, airflow_executable, migrated
from tests.faults.backfill_kit import listed_backfills, make_slow
from tests.kit import REPO, example_project, tidegate
from tests.notify.openlineage_kit import events, validate, with_lineage_file
from tidegate.orchestration import Invocation, invoke, published, run_document

pytestmark = [pytest.mark.airflow, pytest.mark.xdist_group("airflow")]

ASSET = "tidegate://orders/daily_revenue"
TIMEOUT = 240


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Airflow]:
    """One Airflow home for the module (one `db migrate`): the example DAG and the scenarios'."""
    airflow_executable()  # installs Airflow on first use; a failed install fails the tests
    root = tmp_path_factory.mktemp("airflow")
    dags = root / "dags"
    dags.mkdir()
    shutil.copy(EXAMPLE_DAGS / "tidegate_orders.py", dags)
    shutil.copy(TEST_DAGS / "tidegate_scenarios.py", dags)
    # the DAG files read the project's name when parsed: any orders project will do for migrate
    yield migrated(root / "home", dags, example_project(root / "parse", deploy=False))


def _days(first: int, last: int) -> list[str]:
    return [(date(2025, 1, first) + timedelta(days=n)).isoformat() for n in range(last - first + 1)]


def _on(airflow: Airflow, project: Path) -> Airflow:
    return replace(airflow, project=project)


def test_the_example_dag_publishes_its_partitions_as_asset_events(
    airflow_home: Airflow, tmp_path: Path
) -> None:
    project = example_project(tmp_path / "orders")
    with_lineage_file(project)
    airflow = _on(airflow_home, project)
    done = airflow.run("dags", "test", "tidegate_orders", timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout[-6000:]
    states = airflow.task_states("tidegate_orders")
    assert states == {
        "backfill_first_days": ("success", 1),
        "backfill_rest_deferred": ("success", 1),
    }, done.stdout[-6000:]

    # the asset events name exactly the partitions each task published
    assert airflow.asset_partitions(ASSET, "tidegate_orders") == {
        "backfill_first_days": _days(1, 3),
        "backfill_rest_deferred": _days(4, 10),
    }

    # XCom: the run id, its versions and checksums, as tidegate recorded them
    detached = project / ".tidegate" / "detached"
    for task, days in (
        ("backfill_first_days", _days(1, 3)),
        ("backfill_rest_deferred", _days(4, 10)),
    ):
        run_id = airflow.xcom("tidegate_orders", task, "run_id")
        done_partitions = published(run_document(run_id, project))
        assert sorted(p.partition for p in done_partitions) == days
        assert airflow.xcom("tidegate_orders", task, "checksums") == {
            "daily_revenue": {p.partition: p.checksum for p in done_partitions}
        }
        assert airflow.xcom("tidegate_orders", task, "versions") == sorted(
            {p.version_id for p in done_partitions}
        )
        published_xcom = airflow.xcom("tidegate_orders", task, "published")
        assert [p["partition"] for p in published_xcom] == days
        assert all(p["checksum"] and p["rows"] for p in published_xcom)
        # the deferred one was started detached (its log beside the ledger) and followed by the
        # trigger; the other ran in the task
        deferred = task == "backfill_rest_deferred"
        assert (detached / f"{run_id}.log").exists() is deferred
        assert (f"tidegate run {run_id} ended: succeeded" in done.stdout) is deferred
    assert "running trigger in line" in done.stdout

    # tidegate's OpenLineage events name the task that started them as their parent, and the
    # DAG run as the root, as Airflow's OpenLineage provider names them
    sent = events(project / "lineage.jsonl")
    assert {e["eventType"] for e in sent} == {"START", "COMPLETE"}
    parents = set()
    for event in sent:
        validate(event)
        parent = event["run"]["facets"]["parent"]
        parents.add((parent["job"]["name"], parent["root"]["job"]["name"]))
    assert parents == {
        ("tidegate_orders.backfill_first_days", "tidegate_orders"),
        ("tidegate_orders.backfill_rest_deferred", "tidegate_orders"),
    }


def test_refusals_and_usage_errors_fail_without_retry(
    airflow_home: Airflow, tmp_path: Path
) -> None:
    project = example_project(tmp_path / "orders")
    assert tidegate("pause", "daily_revenue", "--project", project).exit_code == 0
    airflow = _on(airflow_home, project)
    done = airflow.run("dags", "test", "tidegate_refusals", timeout=TIMEOUT)
    # every task had retries=2 and no retry delay: a retryable failure would be on its third try
    assert airflow.task_states("tidegate_refusals") == {
        "refused": ("failed", 1),
        "refused_deferred": ("failed", 1),
        "usage": ("failed", 1),
    }, done.stdout[-6000:]
    assert "paused" in done.stdout and "no_such_model" in done.stdout
    assert listed_backfills(project) == []  # nothing started


def test_a_busy_model_is_waited_for_on_the_triggerer(airflow_home: Airflow, tmp_path: Path) -> None:
    project = example_project(tmp_path / "orders")
    airflow = _on(airflow_home, project)
    holder = duckdb.connect(str(project / "warehouse.duckdb"))  # another writer
    try:
        with airflow.started("dags", "test", "tidegate_busy_deferred") as output:
            output.wait_for("a busy wait", lambda: "trying again in" in output.text, TIMEOUT)
            holder.close()
            code = output.finish(TIMEOUT)
    finally:
        holder.close()
    assert code == 0, output.text[-6000:]
    assert "in use by another tidegate process" in output.text
    assert airflow.task_states("tidegate_busy_deferred") == {"backfill": ("success", 1)}
    assert airflow.asset_partitions(ASSET, "tidegate_busy_deferred") == {"backfill": _days(1, 2)}


def test_a_busy_model_is_retried_by_airflow(airflow_home: Airflow, tmp_path: Path) -> None:
    project = example_project(tmp_path / "orders")
    airflow = _on(airflow_home, project)

    def up_for_retry() -> bool:
        rows = airflow.query(
            "SELECT state FROM task_instance WHERE dag_id = ?", "tidegate_busy_retried"
        )
        return rows == [("up_for_retry",)]

    holder = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        with airflow.started("dags", "test", "tidegate_busy_retried") as output:
            output.wait_for("a task up for retry", up_for_retry, TIMEOUT)
            holder.close()
            code = output.finish(TIMEOUT)
    finally:
        holder.close()
    assert code == 0, output.text[-6000:]
    [(state, tries)] = airflow.task_states("tidegate_busy_retried").values()
    assert state == "success" and tries >= 2, output.text[-6000:]
    assert airflow.asset_partitions(ASSET, "tidegate_busy_retried") == {"backfill": _days(3, 4)}


def test_a_stopped_backfill_skips_the_task(airflow_home: Airflow, tmp_path: Path) -> None:
    project = example_project(tmp_path / "orders")
    make_slow(project, 30_000_000)  # each one-day batch takes a while: time to stop it
    airflow = _on(airflow_home, project)

    def run_id() -> str | None:
        runs = [r for r in listed_backfills(project) if r["status"] == "running"]
        return str(runs[0]["run_id"]) if runs else None

    with airflow.started("dags", "test", "tidegate_stopped") as output:
        output.wait_for("a running backfill", lambda: run_id() is not None, TIMEOUT)
        started = run_id()
        assert started is not None
        stop = tidegate("backfill", "stop", started, "--project", project)
        assert stop.exit_code == 0, stop.stderr
        code = output.finish(TIMEOUT)
    assert code == 0, output.text[-6000:]
    assert airflow.task_states("tidegate_stopped") == {"backfill": ("skipped", 1)}
    assert f"tidegate run {started} ended: stopped" in output.text
    assert run_document(started, project)["status"] == "stopped"


def test_the_trigger_follows_a_run_across_a_triggerer_restart(tmp_path: Path) -> None:
    project = example_project(tmp_path / "orders")
    make_slow(project, 30_000_000)  # 90 one-day batches: running all through the test
    started = invoke(
        Invocation(
            "backfill",
            "daily_revenue",
            "2025-01-01..2025-03-31",
            project,
            ("--batch-size", "1", "--detach"),
        )
    )
    assert started.succeeded and started.run_id, started.document
    run_id = started.run_id
    python = airflow_executable().parent / "python"
    script = Path(__file__).parent / "follow_run.py"
    follow = subprocess.Popen(
        [str(python), str(script), run_id, str(project), "2", sys.executable, "-m", "tidegate"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    try:
        assert follow.stdout is not None
        # the first trigger polled for 2 s and was stopped without an event: the run was running
        first = _followed(follow.stdout)
        assert first == {"early": None, "classpath": "tidegate.airflow.trigger.TidegateRunTrigger"}
        # the one built again from its serialized form follows the same run to its end
        assert tidegate("backfill", "stop", run_id, "--project", project).exit_code == 0
        rest, stderr = follow.communicate(timeout=TIMEOUT)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert follow.returncode == 0, stderr[-4000:]
    event = _followed(io.StringIO(rest))["event"]
    assert event["run_id"] == run_id and event["status"] == "stopped", event
    assert run_document(run_id, project)["status"] == "stopped"


def _followed(lines: IO[str]) -> Any:
    """The next line follow_run.py printed after its mark, read."""
    for line in lines:
        if line.startswith("followed: "):
            return json.loads(line.removeprefix("followed: "))
    raise AssertionError("follow_run.py printed nothing more")
