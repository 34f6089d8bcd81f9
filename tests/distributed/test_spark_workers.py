"""Distributed backfills on a Spark warehouse (docs/design.md §7): two workers, each its own JVM,
share one Iceberg folder (its catalog, a SQLite file they both reach) and a PostgreSQL ledger;
workers die at seeded crash points and are replaced, and the result equals a clean run with one
commit marker per partition. Smaller than the PostgreSQL campaign: every JVM start costs seconds."""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.kit import SQLITE_STATE, Process, run_row, worker
from tests.distributed.test_workers import clean_daily_revenue, ended
from tests.engines.postgres_kit import fresh_database
from tests.engines.spark_kit import LOCATION, published_rows, spark_project
from tests.faults.ledger import wait_until
from tests.iceberg.test_crash import main_markers
from tests.kit import EXAMPLE_COLUMNS, tidegate

pytestmark = [
    pytest.mark.spark,
    pytest.mark.postgres,
    pytest.mark.crash,
    pytest.mark.xdist_group("spark"),
]

ROWS_PER_DAY = 4
DAYS = "2025-01-01..2025-01-10"
COLUMNS = EXAMPLE_COLUMNS["daily_revenue"]
ARMED = ("after_stage", "before_publish", "after_publish", "after_ledger")


def catalog_markers(project: Path, run_id: str) -> dict[int, int]:
    """Per partition, how many markers of the run main's history holds."""
    found: dict[int, int] = {}
    for start, _, run, _, _, _ in main_markers(project, LOCATION, "default"):
        if run == run_id:
            found[start] = found.get(start, 0) + 1
    return found


def test_spark_workers_killed_and_replaced_finish_like_a_clean_run(tmp_path: Path) -> None:
    seed = int(os.environ.get("TIDEGATE_CHAOS_SEED", "20261130"))
    chance = random.Random(seed)
    logs = tmp_path / "logs"
    logs.mkdir()
    with fresh_database() as dsn:
        project = spark_project(tmp_path / "lake-project", rows_per_day=ROWS_PER_DAY)
        config = project / "tidegate.toml"
        config.write_text(
            config.read_text().replace(SQLITE_STATE, f'[state]\nurl = "{dsn}"\nschema = "ledger"\n')
        )
        # the ledger moves to PostgreSQL: build and deploy again, in this process's JVM
        assert tidegate("build", "--project", project).exit_code == 0
        deployed = tidegate("deploy", "daily_revenue", "--project", project)
        assert deployed.exit_code == 0, deployed.stderr
        boss = Process(
            logs,
            "coordinator",
            "backfill",
            "daily_revenue",
            "--partitions",
            DAYS,
            "--batch-size",
            "2",
            "--max-concurrency",
            "2",
            "--distributed",
            "--project",
            project,
        )
        run_id = wait_until("the run is queued", lambda: (run_row(dsn) or [None])[0], 120)
        started = kills = 0
        alive: list[Process] = []

        def start_worker(armed: bool) -> None:
            nonlocal started
            started += 1
            env = {"TIDEGATE_CRASH_AT": f"{chance.choice(ARMED)}:1"} if armed else {}
            alive.append(worker(logs, f"w{started}", project, "--lease-seconds", "3", **env))

        for _ in range(2):
            start_worker(armed=True)
        while not ended(boss):
            for process in [p for p in alive if ended(p)]:
                alive.remove(process)
                if process.popen.returncode == -signal.SIGKILL:
                    kills += 1
                else:
                    assert process.popen.returncode == 0, process.stderr()
                # three armed workers in all: two kills at least, one JVM start less per kill
                start_worker(armed=started < 3)
        assert boss.wait() == 0, (boss.stdout()[-2000:], boss.stderr()[-2000:])
        for process in alive:
            assert process.wait(240) == 0, process.stderr()
        assert kills >= 2, f"only {kills} workers were killed (seed {seed})"
        assert run_row(dsn, run_id)[1] == "succeeded"
        markers = catalog_markers(project, run_id)
        assert len(markers) == 10 and set(markers.values()) == {1}, seed
        spark_rows: list[Any] = published_rows(project / LOCATION, "daily_revenue", COLUMNS)
        assert spark_rows == clean_daily_revenue(tmp_path, DAYS), seed
