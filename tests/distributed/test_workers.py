"""Distributed backfills with real `tidegate worker` processes on a shared PostgreSQL ledger and
warehouse (docs/design.md §7): workers killed and replaced, a worker paused past its lease, two
coordinators over the same partitions, a stop, a stop-loss, and the throttle over all workers.

Kills are keyed to crash points (a worker armed with TIDEGATE_CRASH_AT dies there), drawn from a
seeded generator, so a failing campaign replays exactly."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.kit import (
    Process,
    markers_per_partition,
    published_count,
    run_row,
    shared_project,
    worker,
)
from tests.engines.postgres_kit import admin, fresh_database, rows
from tests.faults.ledger import wait_until
from tests.kit import EXAMPLE_COLUMNS, events_of, example_project, tidegate, warehouse_rows
from tests.ops.test_json_schemas import validator
from tidegate.crash import CRASH_POINTS

pytestmark = [pytest.mark.postgres, pytest.mark.crash]

ROWS_PER_DAY = 4
DAILY = EXAMPLE_COLUMNS["daily_revenue"]


def coordinator(logs: Path, project: Path, partitions: str, *options: str) -> Process:
    return Process(
        logs,
        "coordinator",
        "backfill",
        "daily_revenue",
        "--partitions",
        partitions,
        "--distributed",
        *options,
        "--project",
        project,
    )


def clean_daily_revenue(tmp_path: Path, partitions: str) -> list[tuple[Any, ...]]:
    """daily_revenue from a clean single-process run on the embedded default."""
    project = example_project(tmp_path / "clean", rows_per_day=ROWS_PER_DAY)
    done = tidegate("backfill", "daily_revenue", "--partitions", partitions, "--project", project)
    assert done.exit_code == 0, done.stderr
    return [
        tuple(r)
        for r in warehouse_rows(project, f"SELECT {DAILY} FROM daily_revenue ORDER BY {DAILY}")
    ]


def ended(process: Process) -> bool:
    """Whether the process has exited, waiting a tenth of a second for it to."""
    try:
        process.popen.wait(timeout=0.1)
    except subprocess.TimeoutExpired:
        return False
    return True


def published_rows(dsn: str) -> list[tuple[Any, ...]]:
    return rows(dsn, f"SELECT {DAILY} FROM daily_revenue ORDER BY {DAILY}")


def test_workers_killed_at_random_and_replaced_finish_like_a_clean_run(tmp_path: Path) -> None:
    seed = int(os.environ.get("TIDEGATE_CHAOS_SEED", "20261130"))
    chance = random.Random(seed)
    logs = tmp_path / "logs"
    logs.mkdir()
    with fresh_database() as dsn:
        project = shared_project(tmp_path / "shared", dsn, ROWS_PER_DAY)
        boss = coordinator(
            logs, project, "2025-01-01..2025-12-31", "--batch-size", "5", "--max-concurrency", "3"
        )
        run_id = wait_until("the run is queued", lambda: (run_row(dsn) or [None])[0], 60)
        kills = 0
        started = 0
        alive: list[Process] = []

        def start_worker(armed: bool) -> None:
            nonlocal started
            started += 1
            env = {}
            if armed:
                point = chance.choice(CRASH_POINTS)
                env = {"TIDEGATE_CRASH_AT": f"{point}:{chance.randint(1, 4)}"}
            alive.append(worker(logs, f"w{started}", project, "--lease-seconds", "2", **env))

        for _ in range(3):
            start_worker(armed=True)
        # and kills from outside when the run reaches seeded points of its progress
        thresholds = sorted(chance.sample(range(20, 340), 4))
        while not ended(boss):
            for process in [p for p in alive if ended(p)]:
                alive.remove(process)
                if process.popen.returncode == -signal.SIGKILL:
                    kills += 1
                else:
                    assert process.popen.returncode == 0, process.stderr()
                # a dead worker is replaced; the campaign arms the first dozen replacements
                start_worker(armed=started < 12)
            if thresholds and published_count(dsn, run_id) >= thresholds[0]:
                thresholds.pop(0)
                chance.choice(alive).popen.send_signal(signal.SIGKILL)
        assert boss.wait() == 0, (boss.stdout()[-2000:], boss.stderr())
        for process in alive:
            assert process.wait() == 0, process.stderr()
        assert kills >= 3, f"the campaign killed only {kills} workers (seed {seed})"
        assert run_row(dsn, run_id)[1] == "succeeded"
        # no partition was published twice by the run, none is missing
        markers = markers_per_partition(dsn, run_id)
        assert len(markers) == 365 and set(markers.values()) == {1}, seed
        assert published_count(dsn, run_id) == 365
        reclaimed = rows(dsn, "SELECT count(*) FROM ledger.batch_claims WHERE token > 1")
        assert reclaimed[0][0] >= 1, "no batch was ever taken over from a dead worker"
        assert published_rows(dsn) == clean_daily_revenue(tmp_path, "2025-01-01..2025-12-31"), seed


def test_a_worker_paused_past_its_lease_cannot_publish(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with fresh_database() as dsn:
        project = shared_project(tmp_path / "shared", dsn, ROWS_PER_DAY)
        boss = coordinator(logs, project, "2025-01-01..2025-01-03", "--batch-size", "3")
        run_id = wait_until("the run is queued", lambda: (run_row(dsn) or [None])[0], 60)
        # the first worker stops itself after auditing its batch and checking its lease, just
        # before its publish transaction: only the warehouse's fence stands in its way
        paused = worker(
            logs,
            "paused",
            project,
            "--lease-seconds",
            "1",
            TIDEGATE_CRASH_AT="before_publish",
            TIDEGATE_CRASH_SIGNAL="SIGSTOP",
        )
        wait_until("the worker to stop itself", lambda: paused.stopped() or None, 60)
        # its lease expires by the ledger's clock; another worker takes the batch and publishes
        other = worker(logs, "other", project, "--lease-seconds", "30")
        assert other.wait() == 0, other.stderr()
        assert boss.wait() == 0, boss.stderr()
        published = rows(
            dsn,
            "SELECT attempt_id FROM ledger.attempts WHERE run_id = %s AND state = 'published'",
            (run_id,),
        )
        assert len(published) == 3
        # woken up, the paused worker tries to publish with its stale token: refused
        paused.popen.send_signal(signal.SIGCONT)
        assert paused.wait() == 0, paused.stderr()
        assert "lost" in paused.stdout(), paused.stdout()
        assert "fenced: a newer lease holds partition" in paused.stdout(), paused.stdout()
        claims = rows(
            dsn,
            "SELECT token, worker FROM ledger.batch_claims WHERE run_id = %s ORDER BY token",
            (run_id,),
        )
        assert claims == [(1, "paused"), (2, "other")]
        markers = rows(
            dsn,
            "SELECT attempt_id FROM _tidegate.commit_markers WHERE run_id = %s",
            (run_id,),
        )
        assert sorted(markers) == sorted(published)  # the output is the other worker's alone
        stale = rows(
            dsn,
            "SELECT count(*) FROM ledger.attempts WHERE run_id = %s AND state = 'failed'",
            (run_id,),
        )
        assert stale == [(3,)]
        assert run_row(dsn, run_id)[1] == "succeeded"


def test_overlapping_distributed_backfills_never_share_a_partition(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with fresh_database() as dsn:
        project = shared_project(tmp_path / "shared", dsn, ROWS_PER_DAY)
        first = coordinator(logs, project, "2025-01-01..2025-01-31", "--batch-size", "7")
        run_id = wait_until("the run is queued", lambda: (run_row(dsn) or [None])[0], 60)
        second = tidegate(
            "backfill",
            "daily_revenue",
            "--partitions",
            "2025-01-20..2025-02-10",
            "--distributed",
            "--project",
            project,
        )
        assert second.exit_code == 4
        assert second.stderr.count("\n") == 1
        assert f"held by distributed backfill {run_id}" in second.stderr
        assert "2025-01-15..2025-01-21" in second.stderr  # the batch that holds the overlap
        # no worker runs: a stop ends the run at once, resumable (exit 5)
        stopped = tidegate("backfill", "stop", run_id, "--project", project)
        assert stopped.exit_code == 0, stopped.stderr
        assert first.wait() == 5, first.stderr()
        assert run_row(dsn, run_id)[1] == "stopped"
        # stopped, it holds nothing: the other backfill goes, then the first resumes after it
        after = coordinator(logs, project, "2025-01-20..2025-02-10")
        wait_until("the second run", lambda: run_row(dsn)[0] != run_id or None, 60)
        helper = worker(logs, "w1", project)
        assert after.wait() == 0, after.stderr()
        assert helper.wait() == 0, helper.stderr()
        resumed = Process(logs, "resume", "backfill", "resume", run_id, "--project", project)
        wait_until("the resumed run", lambda: run_row(dsn, run_id)[1] == "running" or None, 60)
        helper = worker(logs, "w2", project)
        assert resumed.wait() == 0, resumed.stderr()
        assert helper.wait() == 0, helper.stderr()
        assert set(markers_per_partition(dsn, run_id).values()) == {1}
        assert len(markers_per_partition(dsn, run_id)) == 31


def test_a_stop_loss_on_any_worker_halts_the_run(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with fresh_database() as dsn:
        project = shared_project(tmp_path / "shared", dsn, ROWS_PER_DAY)
        plan = tmp_path / "plan.toml"
        plan.write_text(
            'model = "daily_revenue"\npartitions = "2025-01-01..2025-03-31"\n'
            "batch_size = 5\nmax_concurrency = 2\nmax_source_rows = 60\n"
        )
        boss = Process(
            logs,
            "coordinator",
            "backfill",
            "--file",
            plan,
            "--distributed",
            "--json",
            "--project",
            project,
        )
        wait_until("the run is queued", lambda: run_row(dsn), 60)
        workers = [worker(logs, f"w{i}", project) for i in range(2)]
        assert boss.wait() == 1, boss.stderr()
        for process in workers:
            assert process.wait() == 0, process.stderr()
        run_id, status, reason = run_row(dsn)
        assert status == "failed" and "stop-loss max_source_rows" in reason
        # each batch reads 20 source rows: the budget is exceeded by the fourth batch, and one
        # more may be in flight when it fires (two at a time) — long before the run's 18
        published = published_count(dsn, run_id)
        assert 20 <= published <= 25, published
        end = json.loads(boss.stdout())  # its one result document, also for a failed run
        assert end["schema"] == "tidegate.backfill-result/v1"
        assert end["trigger"]["name"] == "max_source_rows", end


def test_workers_keep_the_runs_concurrency_between_them(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with fresh_database() as dsn:
        project = shared_project(tmp_path / "shared", dsn, ROWS_PER_DAY)
        boss = coordinator(
            logs, project, "2025-01-01..2025-01-24", "--batch-size", "2", "--max-concurrency", "2"
        )
        wait_until("the run is queued", lambda: run_row(dsn), 60)
        workers = [
            worker(logs, f"w{i}", project, "--json", "--events-file", logs / f"w{i}.events")
            for i in range(4)
        ]
        assert boss.wait() == 0, boss.stderr()
        for process in workers:
            assert process.wait() == 0, process.stderr()
        run_id = run_row(dsn)[0]
        # every worker prints one result document and writes its events as JSON lines, each of
        # its versioned schema
        results = [json.loads(p.stdout()) for p in workers]
        for result in results:
            errors = list(validator("worker-result").iter_errors(result))
            assert not errors, [e.message for e in errors]
        assert [r["worker"] for r in results] == [f"w{i}" for i in range(4)]
        assert sum(r["settled"] for r in results) == 12
        events = [e for i in range(4) for e in events_of(logs / f"w{i}.events")]
        for event in events:
            errors = list(validator("worker-event").iter_errors(event))
            assert not errors, [e.message for e in errors]
        kinds = [e["event"] for e in events]
        assert kinds.count("claimed") == kinds.count("settled") == 12
        assert kinds.count("closed") == 1
        assert sum(e["tally"]["published"] for e in events if e["event"] == "settled") == 24
        spans = rows(
            dsn,
            "SELECT batch, min(started_at), max(ended_at) FROM ledger.attempts "
            "WHERE run_id = %s GROUP BY batch",
            (run_id,),
        )
        assert len(spans) == 12
        edges = sorted([(s, 1) for _, s, _ in spans] + [(e, -1) for _, _, e in spans])
        in_flight = peak = 0
        for _, step in edges:
            in_flight += step
            peak = max(peak, in_flight)
        assert peak <= 2
        busy = {w for (w,) in rows(dsn, "SELECT DISTINCT worker FROM ledger.batch_claims")}
        assert len(busy) >= 2  # the batches were shared out


def test_the_embedded_warehouse_cannot_be_distributed(tmp_path: Path) -> None:
    project = example_project(tmp_path / "duck", rows_per_day=ROWS_PER_DAY)
    refused = tidegate(
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-01-01..2025-01-03",
        "--distributed",
        "--project",
        project,
    )
    assert refused.exit_code == 2
    assert 'engine = "postgres"' in refused.stderr and refused.stderr.count("\n") == 1
    listed = tidegate("backfill", "list", "--json", "--project", project)
    assert listed.json()["runs"] == []
    idle = tidegate("worker", "--exit-when-idle", "--project", project)
    assert idle.exit_code == 2 and "distributed runs need" in idle.stderr


def test_resume_retries_what_a_distributed_run_skipped(tmp_path: Path) -> None:
    """A day whose orders are missing is skipped (never published empty); once they are back,
    `backfill resume` queues its batch again and publishes it."""
    logs = tmp_path / "logs"
    logs.mkdir()
    with fresh_database() as dsn:
        project = shared_project(tmp_path / "shared", dsn, ROWS_PER_DAY)
        day = "order_ts >= '2025-01-02' AND order_ts < '2025-01-03'"
        with admin(dsn) as con:
            con.execute(f"CREATE TABLE held_back AS SELECT * FROM orders WHERE {day}")
            con.execute(f"DELETE FROM orders WHERE {day}")
        boss = coordinator(logs, project, "2025-01-01..2025-01-04", "--batch-size", "2")
        run_id = wait_until("the run is queued", lambda: (run_row(dsn) or [None])[0], 60)
        assert worker(logs, "w1", project).wait() == 0
        assert boss.wait() == 1, boss.stderr()
        assert run_row(dsn, run_id)[1] == "failed"
        assert sorted(markers_per_partition(dsn, run_id)) == [
            1_735_689_600 + d * 86_400 for d in (0, 2, 3)
        ]
        with admin(dsn) as con:
            con.execute("INSERT INTO orders SELECT * FROM held_back")
        resumed = Process(logs, "resume", "backfill", "resume", run_id, "--project", project)
        wait_until("the resumed run", lambda: run_row(dsn, run_id)[1] == "running" or None, 60)
        assert worker(logs, "w2", project).wait() == 0
        assert resumed.wait() == 0, resumed.stderr()
        markers = markers_per_partition(dsn, run_id)
        assert len(markers) == 4 and set(markers.values()) == {1}
        assert published_rows(dsn) == clean_daily_revenue(tmp_path, "2025-01-01..2025-01-04")


def test_a_single_writer_leaves_a_queued_run_alone_and_force_reaches_the_workers(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with fresh_database() as dsn:
        project = shared_project(tmp_path / "shared", dsn, ROWS_PER_DAY)
        assert (
            tidegate("pause", "daily_revenue", "--reason", "audit", "--project", project).exit_code
            == 0
        )
        boss = coordinator(logs, project, "2025-01-01..2025-01-03", "--force")
        run_id = wait_until("the run is queued", lambda: (run_row(dsn) or [None])[0], 60)
        # a single writer in between: it reconciles the ledger, and must not end the queued run
        single = tidegate(
            "run", "daily_revenue", "--partition", "2025-02-01", "--force", "--project", project
        )
        assert single.exit_code == 0, single.stderr
        assert run_row(dsn, run_id)[1] == "running"
        assert worker(logs, "w1", project).wait() == 0
        assert boss.wait() == 0, boss.stderr()
        assert len(markers_per_partition(dsn, run_id)) == 3
