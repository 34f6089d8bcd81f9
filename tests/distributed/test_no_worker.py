"""A distributed backfill that no worker picks up says so, and keeps saying it is alive."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.distributed.kit import Process, run_row, shared_project, worker
from tests.engines.postgres_kit import fresh_database
from tests.faults.ledger import wait_until
from tests.kit import tidegate
from tests.ops.test_json_schemas import validator

pytestmark = [pytest.mark.postgres]


def test_a_coordinator_without_a_worker_says_what_it_waits_for(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with fresh_database() as dsn:
        project = shared_project(tmp_path / "shared", dsn, 1)
        boss = Process(
            logs,
            "coordinator",
            "backfill",
            "daily_revenue",
            "--partitions",
            "2025-01-01..2025-01-18",
            "--batch-size",
            "1",
            "--distributed",
            "--project",
            project,
            # the 30 s an operator is given, shortened: the words are the same
            env={"TIDEGATE_UNCLAIMED_SECONDS": "0.5"},
        )
        run_id = wait_until("the run is queued", lambda: (run_row(dsn) or [None])[0], 60)
        told = (
            f"queued 18 batches of {run_id}; waiting for a worker — none has claimed a batch "
            "for 0.5 s (start one with: tidegate worker)"
        )
        wait_until("the coordinator says it waits", lambda: told in boss.stdout() or None)
        # then a line every ~2 s (no terminal): the wait is alive, not hung
        beats = f"{run_id}: 0/18 partitions, waiting for a worker"
        wait_until("two heartbeats", lambda: boss.stdout().count(beats) >= 2 or None)
        helper = worker(logs, "w1", project)
        assert boss.wait() == 0, boss.stderr()
        assert helper.wait() == 0, helper.stderr()
        assert run_row(dsn, run_id)[1] == "succeeded"
        # once a worker claimed a batch, the wait is over: no heartbeat after the outcomes
        out = boss.stdout()
        progress = re.search(rf"{run_id}: (1[0-8]|[1-9])/18 partitions", out)
        assert progress is not None, out
        assert beats not in out[progress.start() :]


def test_a_detached_distributed_backfill_returns_its_run_and_workers_finish_it(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with fresh_database() as dsn:
        project = shared_project(tmp_path / "shared", dsn, 1)
        started = tidegate(
            "backfill",
            "daily_revenue",
            "--partitions",
            "2025-01-01..2025-01-06",
            "--distributed",
            "--detach",
            "--json",
            "--project",
            project,
        )
        assert started.exit_code == 0, started.stderr
        document = json.loads(started.stdout)
        validator("backfill-detached").validate(document)
        run_id = document["run_id"]
        # the run is recorded and queued before the command returned, and nothing is done yet
        assert run_row(dsn, run_id)[1] == "running"
        helper = worker(logs, "w1", project)
        assert helper.wait() == 0, helper.stderr()
        # the background coordinator is this test process's child: it ends once workers did
        _, status = os.waitpid(document["pid"], 0)
        assert os.waitstatus_to_exitcode(status) == 0
        shown = tidegate("show", "run", run_id, "--json", "--project", project).json()
        assert shown["status"] == "succeeded"
        assert sorted(a["partition"] for a in shown["attempts"] if a["state"] == "published") == [
            f"2025-01-0{day}" for day in range(1, 7)
        ]
