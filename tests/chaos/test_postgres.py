"""The chaos campaign on PostgreSQL: `run` and `backfill` (then `backfill resume`) on a
PostgreSQL warehouse, and `tidegate worker` processes of a distributed backfill on a shared
PostgreSQL ledger and warehouse, SIGKILLed at seeded points and checked after every kill
(harness.py).

Worker leases expire by the ledger's clock, `ledger_now_ms()`. The campaign replaces that
function in its own ledger by one reading the server's clock plus an offset the test moves, so
it shows, without waiting, that a dead worker's lease is live for at most one lifetime and
reclaimable once two have passed."""

from __future__ import annotations

import random
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.harness import (
    MODEL,
    TIMEOUT,
    Chain,
    Kill,
    Outputs,
    Partitions,
    assert_consistent,
    assert_converged,
    clean_checksums,
    draw_kill,
    published_attempts,
    resume,
    survive,
    target,
)
from tests.chaos.stores import LEDGER_SCHEMA, Stores
from tests.chaos.summary import SHIFT, record
from tests.distributed.kit import Process, shared_project, worker
from tests.engines.postgres_kit import admin, fresh_database, postgres_project
from tests.faults.ledger import wait_until
from tests.kit import tidegate
from tidegate.crash import ENVIRONMENT_VARIABLE

pytestmark = [pytest.mark.crash, pytest.mark.postgres]

RANGE = "2025-01-01..2025-01-10"
ROWS_PER_DAY = 4
LEASE_SECONDS = 60


@dataclass(frozen=True)
class Clean:
    partitions: Partitions
    checksums: dict[int, str]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clean]:
    """daily_revenue over RANGE from one uninterrupted backfill on a PostgreSQL warehouse."""
    with fresh_database() as dsn:
        project = postgres_project(tmp_path_factory.mktemp("pg-clean") / "proj", dsn, ROWS_PER_DAY)
        done = tidegate("backfill", MODEL, "--partitions", RANGE, "--project", project)
        assert done.exit_code == 0, done.stderr
        stores = Stores(project, warehouse_dsn=dsn)
        yield Clean(target(stores), clean_checksums(stores))


def single_writer_chain(command: str, project: Path) -> Chain:
    at = ("--project", str(project))
    if command == "run":
        argv: tuple[str, ...] = ("run", MODEL, "--partition", RANGE, *at)
        return Chain(command, argv, lambda _: argv, RANGE, at)
    argv = ("backfill", MODEL, "--partitions", RANGE, "--batch-size", "1", *at)
    return Chain(command, argv, resume("backfill", argv, at), RANGE, at)


class PostgresTampering:
    """Faults of a PostgreSQL warehouse: the target table and the commit markers put back as
    a copy kept earlier held them (a restore from a backup), or the target table dropped."""

    KEPT_ROWS = "chaos_kept_rows"
    KEPT_MARKERS = "chaos_kept_markers"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def keep(self) -> None:
        with admin(self.dsn) as con:
            con.execute(f"DROP TABLE IF EXISTS public.{self.KEPT_ROWS}")
            con.execute(f"DROP TABLE IF EXISTS public.{self.KEPT_MARKERS}")
            if _exists(con, "public", MODEL):
                con.execute(f"CREATE TABLE public.{self.KEPT_ROWS} AS TABLE public.{MODEL}")
            if _exists(con, "_tidegate", "commit_markers"):
                con.execute(
                    f"CREATE TABLE public.{self.KEPT_MARKERS} AS TABLE _tidegate.commit_markers"
                )

    def restore(self) -> None:
        with admin(self.dsn) as con:
            if _exists(con, "public", self.KEPT_ROWS):
                if not _exists(con, "public", MODEL):
                    con.execute(f"CREATE TABLE public.{MODEL} (LIKE public.{self.KEPT_ROWS})")
                con.execute(f"DELETE FROM public.{MODEL}")
                con.execute(f"INSERT INTO public.{MODEL} TABLE public.{self.KEPT_ROWS}")
            else:
                con.execute(f"DROP TABLE IF EXISTS public.{MODEL}")
            if _exists(con, "_tidegate", "commit_markers"):
                con.execute("DELETE FROM _tidegate.commit_markers")
                if _exists(con, "public", self.KEPT_MARKERS):
                    con.execute(
                        f"INSERT INTO _tidegate.commit_markers TABLE public.{self.KEPT_MARKERS}"
                    )

    def drop(self) -> None:
        with admin(self.dsn) as con:
            con.execute(f"DROP TABLE IF EXISTS public.{MODEL}")


def _exists(con: Any, schema: str, table: str) -> bool:
    found = con.execute(
        "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
        (schema, table),
    ).fetchone()
    return found is not None


DEFAULT = [("backfill", 1, 3)]
SLOW = [(command, seed, 6) for command in ("run", "backfill") for seed in range(2, 5)]


def warehouse_campaign(command: str, seed: int, kills: int, clean: Clean, tmp: Path) -> None:
    with fresh_database() as dsn:
        project = postgres_project(tmp / "proj", dsn, ROWS_PER_DAY)
        stores = Stores(project, warehouse_dsn=dsn)
        rng = random.Random(f"pg-{command}-{seed + SHIFT}")
        chain = single_writer_chain(command, project)
        versions = [Outputs(clean.partitions, clean.checksums)]
        survived = survive(chain, stores, rng, kills, versions, PostgresTampering(dsn))
        record(command, "postgres", seed, survived)
        assert_converged(stores, clean.partitions, clean.checksums, f"{command} seed {seed}")
        assert survived, f"{command} seed {seed}: the command finished before any kill"


@pytest.mark.parametrize(("command", "seed", "kills"), DEFAULT)
def test_a_postgres_warehouse_killed_and_restarted_equals_a_clean_run(
    command: str, seed: int, kills: int, clean: Clean, tmp_path: Path
) -> None:
    warehouse_campaign(command, seed, kills, clean, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("command", "seed", "kills"), SLOW)
def test_the_slow_postgres_campaign(
    command: str, seed: int, kills: int, clean: Clean, tmp_path: Path
) -> None:
    warehouse_campaign(command, seed, kills, clean, tmp_path)


# --- workers ------------------------------------------------------------------------------------


def install_clock(dsn: str) -> None:
    """Make the ledger's clock the server's plus an offset this test moves (advance)."""
    with admin(dsn) as con:
        con.execute(f"CREATE TABLE {LEDGER_SCHEMA}.chaos_clock (offset_ms BIGINT NOT NULL)")
        con.execute(f"INSERT INTO {LEDGER_SCHEMA}.chaos_clock VALUES (0)")
        con.execute(
            f"CREATE OR REPLACE FUNCTION {LEDGER_SCHEMA}.ledger_now_ms() RETURNS BIGINT "
            "LANGUAGE SQL VOLATILE AS $$ SELECT CAST(floor(extract(epoch FROM "
            "clock_timestamp()) * 1000) AS BIGINT) + (SELECT offset_ms FROM "
            f"{LEDGER_SCHEMA}.chaos_clock) $$"
        )


def advance(dsn: str, ms: int) -> None:
    with admin(dsn) as con:
        con.execute(f"UPDATE {LEDGER_SCHEMA}.chaos_clock SET offset_ms = offset_ms + %s", (ms,))


def live_leases(stores: Stores) -> list[tuple[int, int, int]]:
    """(batch, token, milliseconds left) of every lease live by the ledger's clock."""
    found = stores.ledger(
        "SELECT batch, token, lease_expires - ledger_now_ms() FROM batches "
        "WHERE state = 'leased' AND lease_expires > ledger_now_ms()"
    )
    return [(int(b), int(t), int(left)) for b, t, left in found]


def killed_worker(logs: Path, name: str, project: Path, kill: Kill, stores: Stores) -> int:
    """A worker with `kill` aimed at it; its exit code (-9 when the kill landed)."""
    options = ("--lease-seconds", str(LEASE_SECONDS))
    if kill.point is not None:
        env = {ENVIRONMENT_VARIABLE: f"{kill.point}:{kill.n}"}
        return worker(logs, name, project, *options, **env).wait(TIMEOUT)
    goal = published_attempts(stores) + kill.n
    process = worker(logs, name, project, *options)
    wait_until(
        "the worker publishes or exits",
        lambda: (
            True if process.popen.poll() is not None or published_attempts(stores) >= goal else None
        ),
        TIMEOUT,
    )
    process.popen.send_signal(signal.SIGKILL)
    return process.wait(TIMEOUT)


def worker_campaign(seed: int, kills: int, clean: Clean, tmp: Path) -> None:
    logs = tmp / "logs"
    logs.mkdir()
    with fresh_database() as dsn:
        project = shared_project(tmp / "shared", dsn, ROWS_PER_DAY)
        install_clock(dsn)
        stores = Stores(project, warehouse_dsn=dsn, ledger_dsn=dsn)
        coordinator = Process(
            logs,
            "coordinator",
            "backfill",
            MODEL,
            "--partitions",
            RANGE,
            "--distributed",
            "--batch-size",
            "2",
            "--project",
            project,
        )
        wait_until("the run is queued", lambda: stores.ledger("SELECT run_id FROM runs") or None)
        rng = random.Random(f"worker-{seed + SHIFT}")
        survived: list[str] = []
        held: set[tuple[int, int]] = set()  # (batch, token) a killed worker held
        while len(survived) < kills and coordinator.popen.poll() is None:
            kill = draw_kill(rng)
            code = killed_worker(logs, f"w{len(survived)}-{kill}", project, kill, stores)
            if code == 0:
                continue  # it finished what was left before the kill came
            assert code == -signal.SIGKILL, (str(kill), code)
            survived.append(f"worker|{kill}")
            assert_consistent(stores, [clean.partitions], f"after {survived}")
            leases = live_leases(stores)
            # a dead worker's lease lives at most one lifetime more ...
            assert all(left <= LEASE_SECONDS * 1000 for _, _, left in leases), leases
            held |= {(batch, token) for batch, token, _ in leases}
            # ... and once two have passed, none is live: the next worker can reclaim it
            advance(dsn, 2 * LEASE_SECONDS * 1000)
            assert live_leases(stores) == [], "a lease outlived two lease lifetimes"
        last = worker(logs, "last", project, "--lease-seconds", str(LEASE_SECONDS))
        assert last.wait(TIMEOUT) == 0, last.stderr()
        assert coordinator.wait(TIMEOUT) == 0, coordinator.stderr()
        record("worker", "postgres", seed, survived)
        # dead workers' staging tables stay until the next single writer starts (README, "Not
        # yet"): a scheduler tick over the range (which republishes it, the same) is one
        tick = tidegate("run", MODEL, "--partition", RANGE, "--project", project, "--json")
        assert tick.exit_code == 0, tick.stderr
        assert_converged(stores, clean.partitions, clean.checksums, f"worker seed {seed}")
        # every batch a killed worker held was reclaimed under a newer token and finished
        claims = stores.ledger("SELECT batch, max(token) FROM batch_claims GROUP BY batch")
        newest = {int(b): int(t) for b, t in claims}
        assert all(newest[batch] > token for batch, token in held), (held, newest)
        assert stores.ledger("SELECT count(*) FROM batches WHERE state <> 'done'") == [(0,)]
        assert survived, f"worker seed {seed}: the run finished before any kill"


def test_killed_workers_leases_are_reclaimed_and_the_run_equals_a_clean_one(
    clean: Clean, tmp_path: Path
) -> None:
    worker_campaign(1, 4, clean, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2, 5))
def test_the_slow_worker_campaign(seed: int, clean: Clean, tmp_path: Path) -> None:
    worker_campaign(seed, 8, clean, tmp_path)
