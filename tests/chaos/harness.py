"""The chaos harness: a real tidegate command SIGKILLed at seeded points, restarted, and the
invariants checked after every kill and once it has converged.

A kill is either armed inside the process (a crash point of crash.py and its n-th
hit) or sent from outside once the ledger shows a seeded number of further partitions
published. The same seed replays the same campaign."""

from __future__ import annotations

import random
import signal
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any, Protocol

from tests.chaos.stores import Stores
from tests.faults.backfill_kit import running
from tests.faults.ledger import LIVE_STATES, wait_until
from tests.kit import EXAMPLE_COLUMNS, Result, run_process
from tidegate.crash import CRASH_POINTS, ENVIRONMENT_VARIABLE
from tidegate.domain.partitions import to_epoch as epoch_of
from tidegate.domain.partitions import to_utc

MODEL = "daily_revenue"
TIMEOUT = 90  # one command on a tiny fixture takes a second or two; a loaded CI machine more
OUTSIDE_SHARE = 0.25  # the share of kills sent from outside rather than armed at a point
FAULT_SHARE = 0.25  # the share of kills followed by a warehouse fault (with tampering)
# the warehouse faults, and the Tampering method that brings each about
FAULT_ACTIONS = {"restored": "restore", "dropped": "drop"}
FAULTS = tuple(FAULT_ACTIONS)

# daily_revenue's rows per day: what one whole version of a partition holds
Partitions = dict[date, Counter[tuple[Any, ...]]]


@dataclass(frozen=True)
class Kill:
    point: str | None  # None: from outside, once `n` more partitions are published
    n: int

    def __str__(self) -> str:
        return f"{self.point}:{self.n}" if self.point else f"outside+{self.n}"


def draw_kill(rng: random.Random) -> Kill:
    if rng.random() < OUTSIDE_SHARE:
        return Kill(None, rng.randint(1, 2))
    return Kill(rng.choice(CRASH_POINTS), rng.randint(1, 3))


@dataclass(frozen=True)
class Chain:
    """A command, and the command that carries on after it was killed (its resume, or itself;
    None when the kill came after the run had recorded its success: nothing is left to do)."""

    command: str
    first: tuple[str, ...]
    restart: Callable[[Stores], tuple[str, ...] | None]
    span: str = ""  # the range the chain writes
    at: tuple[str, ...] = ()  # --project DIR


def published_attempts(stores: Stores) -> int:
    [(count,)] = stores.ledger("SELECT count(*) FROM attempts WHERE state = 'published'")
    return int(count)


def attempt(argv: Sequence[str], kill: Kill, stores: Stores) -> Result:
    """Run `argv` once with `kill` aimed at it; its result (exit -9 when the kill landed)."""
    if kill.point is not None:
        env = {ENVIRONMENT_VARIABLE: f"{kill.point}:{kill.n}"}
        return run_process(*argv, env=env, timeout=TIMEOUT)
    goal = published_attempts(stores) + kill.n
    with running(*argv) as process:
        wait_until(
            f"{_name(argv)} to publish {kill.n} more partition(s) or end",
            lambda: True if not process.alive() or published_attempts(stores) >= goal else None,
            TIMEOUT,
        )
        process.send_signal(signal.SIGKILL)  # a no-op when it already exited
        return process.finish(TIMEOUT)


class Tampering(Protocol):
    """What happens to a warehouse behind tidegate's back, between a kill and the restart."""

    def keep(self) -> None:
        """Keep a copy of the warehouse as it is now (a backup)."""

    def restore(self) -> None:
        """Put the kept copy back, as restoring an older backup would."""

    def drop(self) -> None:
        """Drop the target table."""


@dataclass(frozen=True)
class Outputs:
    """What each version computes over the range: its rows by day and the checksums its
    publishes record (by partition start)."""

    rows: Partitions
    checksums: dict[int, str]


def writers(stores: Stores) -> set[tuple[Any, ...]]:
    """(run, process) of every run the ledger knows: a writer past its start-up adds one (a
    new run, or a resumed one reopened by another process)."""
    return set(stores.ledger("SELECT run_id, pid FROM runs"))


def draw_fault(rng: random.Random) -> str | None:
    if rng.random() >= FAULT_SHARE:
        return None
    return rng.choice(FAULTS)


def survive(
    chain: Chain,
    stores: Stores,
    rng: random.Random,
    kills: int,
    versions: Sequence[Outputs],
    tampering: Tampering | None = None,
) -> list[str]:
    """Kill the chain up to `kills` times (fewer when it finishes first), checking what must
    hold at any instant after each kill; then let it finish. Returns the kills it survived.

    With `tampering`, a seeded share of the kills is followed by a warehouse fault before the
    restart (restored from the copy kept at the start or at an earlier kill, or the target
    table dropped); what must hold is checked once the restarted command has run (before it,
    the ledger cannot know), and the chain ends with the `backfill --stale-only` a user runs
    to republish what the faults took away."""
    argv: tuple[str, ...] | None = chain.first
    survived: list[str] = []
    faults: list[str] = []  # not kills: the campaign's summary counts kills
    tampered = False
    if tampering is not None:
        tampering.keep()
    rows = [v.rows for v in versions]
    # the writers the ledger knew when the warehouse was last changed behind its back: until a
    # restart passed its start-up (a run created or reopened), nothing of tidegate has looked
    unseen: set[tuple[Any, ...]] | None = None
    while argv is not None and len(survived) < kills:
        kill = draw_kill(rng)
        result = attempt(argv, kill, stores)
        if result.exit_code == 0:  # it finished before the kill came
            break
        assert result.exit_code == -signal.SIGKILL, (argv, str(kill), result.stderr)
        survived.append(f"{_name(argv)}|{kill}")
        if unseen is not None and not writers(stores) - unseen:
            faults.append(f"kill {len(survived)} came before the restart's start-up")
        else:
            unseen = None
            assert_consistent(stores, rows, f"after {survived} {faults}")
            assert_green_is_right(stores, versions, f"after {survived} {faults}")
        argv = chain.restart(stores)
        fault = None if tampering is None or argv is None else draw_fault(rng)
        if fault is not None and tampering is not None:
            getattr(tampering, FAULT_ACTIONS[fault])()
            faults.append(f"warehouse {fault} after kill {len(survived)}")
            unseen = writers(stores)
            tampered = True
        elif tampering is not None and rng.random() < 0.5:
            tampering.keep()
    if argv is not None and len(survived) >= kills:
        finished = run_process(*argv, timeout=TIMEOUT)
        assert finished.exit_code == 0, (argv, finished.stderr)
    if tampered:
        assert_green_is_right(stores, versions, f"after {survived} {faults}")
    if tampered and _marked(stores):
        argv = ("backfill", MODEL, "--partitions", chain.span, "--stale-only", *chain.at)
        repaired = run_process(*argv, timeout=TIMEOUT)
        assert repaired.exit_code == 0, (argv, repaired.stderr)
    return survived


def _name(argv: Sequence[str]) -> str:
    """The command a kill hit: `backfill`, `backfill resume`, `worker`, …"""
    return f"{argv[0]} resume" if argv[1] == "resume" else argv[0]


def newest_run(stores: Stores, kind: str) -> tuple[str, str] | None:
    """(run_id, status) of the newest run of `kind`."""
    found = stores.ledger(
        "SELECT run_id, status FROM runs WHERE kind = ? ORDER BY run_id DESC LIMIT 1", [kind]
    )
    return (str(found[0][0]), str(found[0][1])) if found else None


def resume(
    kind: str, first: tuple[str, ...], at: tuple[str, ...]
) -> Callable[[Stores], tuple[str, ...] | None]:
    """After a kill: resume the killed run; start over when it never started; stop when it
    had recorded its success before the kill (resuming it would be a no-op)."""

    def carry_on(stores: Stores) -> tuple[str, ...] | None:
        found = newest_run(stores, kind)
        if found is None:
            return first
        run_id, status = found
        return None if status == "succeeded" else (kind, "resume", run_id, *at)

    return carry_on


# --- the invariants -------------------------------------------------------------------------


def target(stores: Stores) -> Partitions:
    """daily_revenue as it is now, its rows by day."""
    found: Partitions = {}
    if not _exists(stores, ("main", "public"), MODEL):
        return found
    for row in stores.warehouse(f"SELECT {EXAMPLE_COLUMNS[MODEL]} FROM {MODEL}"):
        found.setdefault(row[0], Counter())[tuple(row)] += 1
    return found


def _exists(stores: Stores, schemas: tuple[str, ...], table: str) -> bool:
    """Whether the table exists yet (a kill may come before the first publish creates it)."""
    marks = ", ".join("?" for _ in schemas)
    return bool(
        stores.warehouse(
            "SELECT 1 FROM information_schema.tables "
            f"WHERE table_schema IN ({marks}) AND table_name = ?",
            [*schemas, table],
        )
    )


def _markers(stores: Stores) -> list[tuple[Any, ...]]:
    """(partition_start, attempt_id, run_id, checksum, published_at) of every commit marker."""
    if not _exists(stores, ("_tidegate",), "commit_markers"):
        return []
    return stores.warehouse(
        "SELECT partition_start, attempt_id, run_id, checksum, published_at "
        "FROM _tidegate.commit_markers WHERE model = ?",
        [MODEL],
    )


def to_epoch(day: date) -> int:
    """A day's partition_start, as the ledger and the markers key it."""
    return epoch_of(datetime(day.year, day.month, day.day, tzinfo=timezone.utc))


def _newest(markers: list[tuple[Any, ...]]) -> dict[int, tuple[Any, ...]]:
    """The newest marker of each partition: the publish the warehouse holds now."""
    newest: dict[int, tuple[Any, ...]] = {}
    for marker in markers:
        if marker[0] not in newest or marker[4] > newest[marker[0]][4]:
            newest[marker[0]] = marker
    return newest


def _ledger_published(stores: Stores) -> dict[int, tuple[str, str]]:
    """partition_start -> (attempt_id, checksum) the ledger calls published."""
    rows = stores.ledger(
        "SELECT partition_start, attempt_id, checksum FROM partitions "
        "WHERE model = ? AND attempt_id IS NOT NULL",
        [MODEL],
    )
    return {int(start): (attempt_id, checksum) for start, attempt_id, checksum in rows}


def _live(stores: Stores) -> set[str]:
    marks = ", ".join("?" for _ in LIVE_STATES)
    rows = stores.ledger(f"SELECT attempt_id FROM attempts WHERE state IN ({marks})", LIVE_STATES)
    return {r[0] for r in rows}


def _marked(stores: Stores) -> set[int]:
    """Partitions of the target carrying an open mark (tainted, stale, diverged, missing): the
    ledger does not show them green."""
    rows = stores.ledger(
        "SELECT partition_start FROM tainted_partitions WHERE model = ? AND cleared_at IS NULL",
        [MODEL],
    )
    return {int(r[0]) for r in rows}


def assert_green_is_right(stores: Stores, versions: Sequence[Outputs], when: str) -> None:
    """No partition is shown published and green (no open mark) while its rows differ from
    what its recorded attempt computed: the warehouse holds, for that day, one version's whole
    output, and the checksum the ledger records is that version's."""
    now = target(stores)
    marked = _marked(stores)
    for start, (_, checksum) in _ledger_published(stores).items():
        if start in marked:
            continue
        day = to_utc(start).date()
        rows = now.get(day)
        assert rows is not None, f"{when}: {day} is shown published, the warehouse has no rows"
        assert any(
            rows == v.rows.get(day) and v.checksums.get(start) == checksum for v in versions
        ), f"{when}: {day} is shown published ({checksum}) over other rows"


def assert_consistent(stores: Stores, versions: Sequence[Partitions], when: str) -> None:
    """What holds at any instant, a SIGKILL included: every partition in the target is one
    version's whole output (not half written, no duplicate row); no run published a partition
    twice; every partition the ledger calls published has that attempt's marker and checksum;
    a newer marker than the ledger knows belongs to an attempt the ledger still has live (the
    kill came between the warehouse commit and the ledger's). A partition the ledger marks
    missing or diverged (the warehouse was changed behind its back) is exempt from the
    ledger's and the markers' agreement: the mark says they do not."""
    now = target(stores)
    for day, rows in now.items():
        assert any(rows == v.get(day) for v in versions), f"{when}: {day} is not whole: {rows}"
    marked = _marked(stores)
    markers = _markers(stores)
    missing = {m[0] for m in markers} - {to_epoch(day) for day in now} - marked
    assert not missing, f"{when}: partitions with a commit marker but no rows: {missing}"
    twice = [k for k, n in Counter((m[2], m[0]) for m in markers).items() if n > 1]
    assert not twice, f"{when}: (run, partition) published twice: {twice}"
    by_attempt = {m[1]: m for m in markers}
    newest = _newest(markers)
    ledger = _ledger_published(stores)
    live = _live(stores)
    for start, (attempt_id, checksum) in ledger.items():
        if start in marked:
            continue
        found = by_attempt.get(attempt_id)
        assert found is not None, f"{when}: {start}: published {attempt_id} has no marker"
        assert found[3] == checksum, f"{when}: {start}: ledger {checksum}, marker {found[3]}"
    for start, marker in newest.items():
        if start not in marked and ledger.get(start, (None,))[0] != marker[1]:
            assert marker[1] in live, f"{when}: {start}: marker {marker[1]} unknown to the ledger"


def assert_converged(
    stores: Stores, final: Partitions, checksums: dict[int, str], when: str
) -> None:
    """After the chain finished: the target equals a clean run's, checksums included; the
    ledger and the markers agree exactly; nothing is left mid-protocol or in staging."""
    assert target(stores) == final, f"{when}: the target differs from a clean run"
    ledger = _ledger_published(stores)
    assert {s: c for s, (_, c) in ledger.items()} == checksums, f"{when}: checksums differ"
    newest = _newest(_markers(stores))
    assert {s: m[1] for s, m in newest.items()} == {s: a for s, (a, _) in ledger.items()}, when
    assert _live(stores) == set(), f"{when}: attempts left mid-protocol"
    assert stores.staging_tables() == 0, f"{when}: staging left behind"


def clean_checksums(stores: Stores) -> dict[int, str]:
    return {s: c for s, (_, c) in _ledger_published(stores).items()}
