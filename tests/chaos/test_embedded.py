"""The chaos campaign on the embedded default (DuckDB warehouse, SQLite ledger): `run`,
`backfill` (then `backfill resume`), `rerun` and `recover` (then `recover resume`) SIGKILLed at
seeded points, restarted, and checked after every kill (harness.py).

rerun and recover replace partitions a buggy version wrote (refunded orders counted as
completed: every check passes, the rows are wrong) with the active, fixed version's, so "whole"
means every partition is at every instant entirely the buggy or entirely the fixed output.
`TIDEGATE_CHAOS_SEED` shifts every seed, to explore beyond the campaign CI replays."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import duckdb
import pytest

from tests.chaos.harness import (
    MODEL,
    Chain,
    assert_consistent,
    assert_converged,
    assert_green_is_right,
    resume,
    survive,
)
from tests.chaos.projects import RANGE, Fixtures, build_fixtures, ok
from tests.chaos.stores import Stores
from tests.chaos.summary import SHIFT, record

pytestmark = [pytest.mark.crash, pytest.mark.duckdb]


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> Fixtures:
    return build_fixtures(tmp_path_factory.mktemp("chaos"))


class DuckDBTampering:
    """Faults of the warehouse file: restored from a copy kept earlier, or its table dropped."""

    def __init__(self, project: Path) -> None:
        self.file = project / "warehouse.duckdb"
        self.kept = project.parent / "kept.duckdb"

    def _files(self, base: Path) -> list[Path]:
        return [base, base.with_name(base.name + ".wal")]

    def keep(self) -> None:
        for source, copy in zip(self._files(self.file), self._files(self.kept), strict=True):
            copy.unlink(missing_ok=True)
            if source.exists():
                shutil.copyfile(source, copy)

    def restore(self) -> None:
        for copy, target in zip(self._files(self.kept), self._files(self.file), strict=True):
            target.unlink(missing_ok=True)
            if copy.exists():
                shutil.copyfile(copy, target)

    def drop(self) -> None:
        con = duckdb.connect(str(self.file))
        try:
            con.execute(f"DROP TABLE IF EXISTS {MODEL}")
        finally:
            con.close()


def chain(command: str, project: Path, fixtures: Fixtures) -> Chain:
    at = ("--project", str(project))
    if command == "run":
        argv: tuple[str, ...] = ("run", MODEL, "--partition", RANGE, *at)
        return Chain(command, argv, lambda _: argv, RANGE, at)
    if command == "backfill":
        argv = (
            "backfill",
            MODEL,
            "--partitions",
            RANGE,
            "--batch-size",
            "1",
            "--max-concurrency",
            "2",
            *at,
        )
        return Chain(command, argv, resume("backfill", argv, at), RANGE, at)
    if command == "rerun":
        argv = ("rerun", fixtures.buggy_run, "--partitions", RANGE, "--approve", "chaos", *at)
        return Chain(command, argv, lambda _: argv, RANGE, at)
    assert command == "recover"
    ok(project, "taint", MODEL, "--partitions", RANGE, "--reason", "refunds counted as completed")
    argv = ("recover", MODEL, "--batch-size", "1", *at)
    return Chain(command, argv, resume("recover", argv, at), RANGE, at)


COMMANDS = ("run", "backfill", "rerun", "recover")
# (command, seed, kills): the default campaign, then the slow one's further seeds
DEFAULT = [(command, 1, 6) for command in COMMANDS]
SLOW = [(command, seed, 8) for command in COMMANDS for seed in range(2, 8)]


def campaign(command: str, seed: int, kills: int, fixtures: Fixtures, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    starts_buggy = command in ("rerun", "recover")
    shutil.copytree(fixtures.buggy if starts_buggy else fixtures.fresh, project)
    stores = Stores(project)
    versions = fixtures.outputs if starts_buggy else fixtures.outputs[:1]
    rng = random.Random(f"{command}-{seed + SHIFT}")
    survived = survive(
        chain(command, project, fixtures),
        stores,
        rng,
        kills,
        versions,
        DuckDBTampering(project),
    )
    record(command, "duckdb", seed, survived)
    assert_converged(stores, fixtures.clean, fixtures.checksums, f"{command} seed {seed}")
    assert survived, f"{command} seed {seed}: the command finished before any kill"


@pytest.mark.parametrize(("command", "seed", "kills"), DEFAULT)
def test_killed_and_restarted_until_done_equals_a_clean_run(
    command: str, seed: int, kills: int, fixtures: Fixtures, tmp_path: Path
) -> None:
    campaign(command, seed, kills, fixtures, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("command", "seed", "kills"), SLOW)
def test_the_slow_campaign(
    command: str, seed: int, kills: int, fixtures: Fixtures, tmp_path: Path
) -> None:
    campaign(command, seed, kills, fixtures, tmp_path)


@pytest.mark.parametrize("fault", ["restore", "drop"])
def test_the_green_check_catches_a_warehouse_changed_behind_the_ledgers_back(
    fault: str, fixtures: Fixtures, tmp_path: Path
) -> None:
    """Restored from a copy kept after 5 days, or the table dropped: until a tidegate command
    has looked, the ledger shows days green whose rows are gone."""
    project = tmp_path / "proj"
    shutil.copytree(fixtures.fresh, project)
    tampering = DuckDBTampering(project)
    ok(project, "backfill", MODEL, "--partitions", "2025-01-01..2025-01-05")
    tampering.keep()
    ok(project, "backfill", MODEL, "--partitions", RANGE)
    stores = Stores(project)
    assert_green_is_right(stores, fixtures.outputs[:1], "before")
    getattr(tampering, fault)()
    with pytest.raises(AssertionError, match="shown published"):
        assert_green_is_right(stores, fixtures.outputs[:1], f"after the {fault}")


@pytest.mark.parametrize(
    "tamper",
    [
        # a duplicated row
        "INSERT INTO daily_revenue SELECT * FROM daily_revenue WHERE order_date = '2025-01-03'",
        # a half-written partition
        "DELETE FROM daily_revenue WHERE order_date = '2025-01-04' AND status = 'completed'",
        # a publish the ledger never heard of
        "INSERT INTO _tidegate.commit_markers SELECT * REPLACE ('att-unknown' AS attempt_id, "
        "'9999-12-31T00:00:00Z' AS published_at) FROM _tidegate.commit_markers LIMIT 1",
    ],
    ids=["duplicate", "half-written", "unknown-marker"],
)
def test_the_invariants_catch_what_they_guard_against(
    tamper: str, fixtures: Fixtures, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    shutil.copytree(fixtures.fresh, project)
    ok(project, "backfill", MODEL, "--partitions", RANGE)
    stores = Stores(project)
    assert_consistent(stores, [fixtures.clean], "before")
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    con.execute(tamper)
    con.close()
    with pytest.raises(AssertionError):
        assert_consistent(stores, [fixtures.clean], "after tampering")
