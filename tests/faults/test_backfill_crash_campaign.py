"""G1 for backfills: SIGKILL a running backfill at seeded (crash point, n-th hit) pairs covering
every crash point, resume it by run id, and compare with a clean run of the same plan.

The plan: daily_revenue over 2025-01-01..2025-01-20 in batches of 3 with 2 batches in flight,
i.e. 7 batches (six of 3 days, one of 2), each one unit (its days are consecutive and complete).
after_intent is hit once per batch, the other points once per unit: 7 hits each, so any n in
1..7 is always reached. The clean run checks that count from the batches it recorded.
"""

from __future__ import annotations

import random
import shutil
import signal
from collections import Counter
from datetime import date
from pathlib import Path

import pytest

from tests.faults.backfill_kit import (
    MODEL,
    days,
    listed_backfills,
    marker_days,
    published_days,
    run_row,
    show_run,
)
from tests.faults.ledger import (
    assert_ledger_matches_markers,
    live_attempts,
    oracle_between,
    published_checksums,
)
from tests.kit import (
    assert_exactly_once,
    assert_no_staging,
    example_project,
    published_daily_revenue,
    run_process,
    run_process_events,
)
from tidegate.crash import CRASH_POINTS, ENVIRONMENT_VARIABLE

SEED = 20250120
FIRST, LAST = date(2025, 1, 1), date(2025, 1, 20)
DAYS = days(FIRST, LAST)
BATCH_SIZE, CONCURRENCY = 3, 2
BATCHES = -(-len(DAYS) // BATCH_SIZE)  # 7
UNIT_SIZES = sorted({min(BATCH_SIZE, len(DAYS) - i) for i in range(0, len(DAYS), BATCH_SIZE)})
HITS = {point: BATCHES for point in CRASH_POINTS}  # once per batch = once per unit here
# The highest n aimed at per point: its last hit (crash.py counts hits under a lock, so two
# workers reaching a point at once count twice).
HIGHEST = HITS
SEEDED_PER_POINT = 3
COMMAND = (
    "backfill",
    MODEL,
    "--partitions",
    f"{FIRST}..{LAST}",
    "--batch-size",
    str(BATCH_SIZE),
    "--max-concurrency",
    str(CONCURRENCY),
)


def campaign(seed: int = SEED) -> list[tuple[str, int]]:
    """For every crash point: its first and highest hit (the first batch; the last unit, e.g.
    a run whose every unit is done but which never closed) and SEEDED_PER_POINT distinct hits
    in between, drawn from random.Random(seed); all in a seeded random order."""
    rng = random.Random(seed)
    pairs = [
        (point, n)
        for point in CRASH_POINTS
        for n in sorted(
            [1, HIGHEST[point], *rng.sample(range(2, HIGHEST[point]), SEEDED_PER_POINT)]
        )
    ]
    rng.shuffle(pairs)
    return pairs


CASES = campaign()


def test_the_campaign_is_seeded_and_covers_every_crash_point() -> None:
    assert campaign(SEED) == CASES, "the campaign must be reproducible from its seed"
    assert len(CASES) >= 20 and len(set(CASES)) == len(CASES)
    assert {point for point, _ in CASES} == set(CRASH_POINTS)
    assert all(1 <= n <= HIGHEST[point] <= HITS[point] for point, n in CASES)
    assert {(point, HIGHEST[point]) for point in CRASH_POINTS} <= set(CASES)


def _sizes_of(units: int) -> set[int]:
    """How many partitions `units` distinct units of this plan can hold together."""
    if units <= 0:
        return {0}
    return {units * max(UNIT_SIZES) - k for k in range(len(UNIT_SIZES))}


def expected_published_before_kill(point: str, n: int) -> set[int] | None:
    """How many partitions the ledger holds as published when the n-th hit of `point` kills
    the process. Publishes are serial (one worker at a time), so the points inside a publish
    are hit in a fixed order with respect to each other. after_intent, on the coordinator, is
    hit while the workers go on: batch n is prepared once fewer than CONCURRENCY batches are in
    flight, so at least n - CONCURRENCY are published, and the others may be. after_stage and
    after_audit run while other workers publish (None: not exact)."""
    if point == "after_intent":
        return set().union(*(_sizes_of(k) for k in range(n - CONCURRENCY, n)))
    if point in ("before_publish", "after_publish"):
        return _sizes_of(n - 1)
    if point == "after_ledger":
        return _sizes_of(n)
    return None


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One built and deployed orders project, copied for every case."""
    return example_project(tmp_path_factory.mktemp("backfill-template") / "proj")


@pytest.fixture(scope="module")
def clean(template: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[int, str]]:
    """Per-partition (rows, checksum) of an uninterrupted backfill of the same plan."""
    project = tmp_path_factory.mktemp("backfill-clean") / "proj"
    shutil.copytree(template, project)
    result = run_process(*COMMAND, "--project", project, "--json", timeout=60)
    assert result.exit_code == 0, result.stderr
    [run] = listed_backfills(project)
    assert run["status"] == "succeeded"
    # the plan really has BATCHES batches of one unit each (so every point is hit BATCHES times)
    attempts = show_run(project, run["run_id"])["attempts"]
    assert len({a["batch"] for a in attempts}) == BATCHES
    assert sorted(Counter(a["batch"] for a in attempts).values()) == sorted(
        [min(BATCH_SIZE, len(DAYS) - i) for i in range(0, len(DAYS), BATCH_SIZE)]
    )
    checksums = published_checksums(project, MODEL)
    assert len(checksums) == len(DAYS)
    return checksums


@pytest.mark.crash
@pytest.mark.parametrize(("point", "n"), CASES, ids=[f"{p}:{n}" for p, n in CASES])
def test_kill_a_backfill_then_resume_is_identical_to_a_clean_run(
    point: str,
    n: int,
    template: Path,
    clean: dict[int, tuple[int, str]],
    tmp_path: Path,
) -> None:
    project = tmp_path / "proj"
    shutil.copytree(template, project)

    crashed = run_process(
        *COMMAND, "--project", project, env={ENVIRONMENT_VARIABLE: f"{point}:{n}"}, timeout=60
    )
    assert crashed.exit_code == -signal.SIGKILL, (crashed.exit_code, crashed.stderr)

    # what the dead process left: its run still "running", the kill exactly where it was aimed
    [listed] = listed_backfills(project)
    run_id = listed["run_id"]
    assert listed["status"] == "running"
    plan = run_row(project, run_id)["plan"]
    ledger_before = published_days(project)
    markers_before = marker_days(project)
    assert set(ledger_before) <= set(markers_before)
    published_too = len(markers_before) - len(ledger_before)
    if point == "after_publish":
        # the n-th unit committed in the warehouse; the ledger never heard of it
        assert published_too in UNIT_SIZES, (ledger_before, markers_before)
    elif point in ("after_intent", "after_stage", "after_audit"):
        # not a publish: another worker may have been between its commit and its ledger write
        assert published_too in {0, *UNIT_SIZES}, (ledger_before, markers_before)
    else:
        assert published_too == 0, (ledger_before, markers_before)
    expected = expected_published_before_kill(point, n)
    if expected is not None:
        assert len(ledger_before) in expected, (point, n, ledger_before)
    else:
        assert len(ledger_before) <= (n - 1) * max(UNIT_SIZES)

    resumed = run_process_events(
        "backfill", "resume", run_id, "--project", project, "--json", timeout=60
    )
    assert resumed.exit_code == 0, (resumed.stdout, resumed.stderr)
    events = resumed.events
    assert events[0]["event"] == "start" and events[-1]["event"] == "end"
    assert events[0]["run_id"] == run_id
    assert events[0]["version_id"] == plan["version_id"]
    assert (events[0]["batch_size"], events[0]["max_concurrency"]) == (BATCH_SIZE, CONCURRENCY)
    assert events[-1]["status"] == "succeeded"
    # the resume did only what the dead process had not (published or committed) done
    redone = [e["partition"] for e in events if e["event"] == "partition"]
    assert all(e["state"] == "published" for e in events if e["event"] == "partition")
    assert sorted(redone) == [str(d) for d in DAYS if d not in set(markers_before)]

    # the table: the oracle for those days, each row exactly once, no staging left
    oracle = oracle_between(project, FIRST, LAST)
    assert {row[0] for row in oracle} == set(DAYS)
    assert_exactly_once(published_daily_revenue(project), oracle)
    assert_no_staging(project)

    # the ledger: a clean run's checksums, agreeing with the markers, nothing left mid-protocol
    assert published_checksums(project, MODEL) == clean
    assert assert_ledger_matches_markers(project, MODEL) == len(DAYS)
    assert live_attempts(project) == []

    # the run: succeeded, and it published every partition of the range exactly once
    shown = show_run(project, run_id)
    assert shown["status"] == "succeeded", shown["reason"]
    published = Counter(a["partition"] for a in shown["attempts"] if a["state"] == "published")
    assert published == Counter(str(d) for d in DAYS)
    assert published_days(project, run_id) == DAYS
    assert {a["version_id"] for a in shown["attempts"]} == {plan["version_id"]}
