"""A large ledger for the render-time measurement: 100 daily models × 3 years (about 110,000
partitions), written through the StateStore seam as runs would, in seeded random stretches of
every state."""

from __future__ import annotations

import random
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

from tests.kit import example_project, tidegate
from tidegate.domain.attempt import AttemptState, RunStatus
from tidegate.domain.partitions import DAY_SECONDS, Grain, parse_partition
from tidegate.domain.run import Attempt, Run
from tidegate.state.base import Event
from tidegate.state.sqlite import SQLiteStateStore

MODELS = 100
FIRST_DAY = "2023-01-01"
AS_OF = "2026-01-01T03:00:00Z"  # every day of 2023..2025 is due
DAYS = 1096
AT = "2026-01-01T00:00:00.000000+00:00"
CHECKSUM = "24:00000000deadbeef"
# state of a stretch of days → its weight
WEIGHTS = {"published": 70, "stale": 10, "failed": 4, "skipped": 3, "running": 1, "missing": 12}


def large_project(target: Path, seed: int = 8) -> Path:
    project = example_project(target, rows_per_day=1, deploy=False)
    models = project / "models"
    daily = (models / "daily_revenue.sql").read_text()
    daily = daily.replace('start = "2025-01-01"', f'start = "{FIRST_DAY}"')
    shutil.rmtree(models)
    models.mkdir()
    for n in range(MODELS):
        (models / f"daily_{n:03d}.sql").write_text(daily)
    built = tidegate("build", "--project", project)
    assert built.exit_code == 0, built.stderr
    store = SQLiteStateStore(project / ".tidegate" / "state.db")
    try:
        rng = random.Random(seed)
        for n in range(MODELS):
            _history(store, f"daily_{n:03d}", rng)
    finally:
        store.close()
    return project


def _stretches(rng: random.Random) -> list[str]:
    states, names = [], list(WEIGHTS)
    while len(states) < DAYS:
        state = rng.choices(names, weights=[WEIGHTS[s] for s in names])[0]
        states += [state] * rng.randint(1, 40)
    return states[:DAYS]


def _history(store: SQLiteStateStore, model: str, rng: random.Random) -> None:
    [active] = store.versions(model)
    flipped = "1" if active.version_id[0] == "0" else "0"
    older = replace(active, version_id=flipped + active.version_id[1:], fingerprint="0" * 64, seq=0)
    store.save_version(older)
    store.activate(model, active.version_id, AT, Event("deploy", "bench", AT, model))
    run_id = f"run-20260101T000000{rng.randrange(10**6):06d}Z-{rng.randrange(16**6):06x}"
    store.create_run(
        Run(
            run_id,
            "backfill",
            (model,),
            f"{FIRST_DAY}..2025-12-31",
            "bench",
            RunStatus.SUCCEEDED,
            AT,
        )
    )
    first = parse_partition(FIRST_DAY, Grain.DAY).start
    by_state: dict[str, list[str]] = {}
    attempts = []
    for day, state in enumerate(_stretches(rng)):
        if state == "missing":
            continue
        start = first + day * DAY_SECONDS
        version = older if state == "stale" else active
        attempt_id = f"att-{model}-{day}"
        attempts.append(
            Attempt(
                attempt_id,
                run_id,
                model,
                "day",
                start,
                start + DAY_SECONDS,
                version.version_id,
                AttemptState.PENDING,
                AT,
            )
        )
        by_state.setdefault(state, []).append(attempt_id)
    store.create_attempts(attempts)
    # Settle them in bulk, as the executor's moves and publishes would one by one (those do a
    # statement per attempt: far too slow to write 110,000 of them here).
    outcomes = (
        ("published", by_state.get("published", []) + by_state.get("stale", []), None),
        ("failed", by_state.get("failed", []), "a check failed"),
        ("skipped", by_state.get("skipped", []), "orders: no rows"),
        ("running", by_state.get("running", []), None),
    )
    with sqlite3.connect(store.path) as con:
        for state, ids, error in outcomes:
            published = state == "published"
            con.executemany(
                "UPDATE attempts SET state = ?, error = ?, ended_at = ?, row_count = ?, "
                "checksum = ? WHERE attempt_id = ?",
                [
                    (
                        state,
                        error,
                        AT,
                        24 if published else None,
                        CHECKSUM if published else None,
                        a,
                    )
                    for a in ids
                ],
            )
            con.executemany(
                "UPDATE partitions SET last_state = ?, last_error = ? WHERE model = ? "
                "AND last_attempt_id = ?",
                [(state, error, model, a) for a in ids],
            )
        con.execute(
            "UPDATE partitions SET version_id = a.version_id, run_id = a.run_id, "
            "attempt_id = a.attempt_id, row_count = a.row_count, checksum = a.checksum, "
            "published_at = ? FROM attempts AS a WHERE a.attempt_id = partitions.last_attempt_id "
            "AND a.state = 'published' AND partitions.model = ?",
            (AT, model),
        )
