"""The record of what a chaos run survived: each chain appends its kills to this session's
kills file (one JSON line each; xdist workers append at once, and a line this short is written
whole); at the end the pytest controller sums them up in SUMMARY (tests/conftest.py).

Each session has a kills file of its own, named in TIDEGATE_CHAOS_KILLS by the controller
before its xdist workers start (they inherit it), so sessions running side by side, or one
that only collects, never count another's kills."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SUMMARY = Path(os.environ.get("TIDEGATE_CHAOS_SUMMARY", HERE / "last-run.json"))
KILLS_VARIABLE = "TIDEGATE_CHAOS_KILLS"
# shifts every seed, to explore beyond the campaign CI replays (a failing chain names its seed)
SHIFT = int(os.environ.get("TIDEGATE_CHAOS_SEED", "0"))
DEFAULT_SEED = 1  # the default suite's chains use seed 1; the slow part's, the seeds above it


def start_session() -> None:
    os.environ[KILLS_VARIABLE] = str(HERE / f".kills-{os.getpid()}.jsonl")


def record(chain: str, fixture: str, seed: int, survived: list[str]) -> None:
    """One chain's kills (`command|point:n`, or `command|outside+n`), by its unshifted seed."""
    kills = Path(os.environ.get(KILLS_VARIABLE, HERE / ".kills.jsonl"))
    entry = {
        "chain": chain,
        "fixture": fixture,
        "suite": "default" if seed == DEFAULT_SEED else "slow",
        "seed": seed + SHIFT,
        "kills": survived,
    }
    with kills.open("a") as out:
        out.write(json.dumps(entry) + "\n")


def finish_session() -> dict[str, Any] | None:
    """Sum up this session's kills into SUMMARY (None when it ran no chain)."""
    kills = Path(os.environ.get(KILLS_VARIABLE, HERE / ".kills.jsonl"))
    if not kills.exists():
        return None
    per: Counter[str] = Counter()
    points: Counter[str] = Counter()
    suites: Counter[str] = Counter()
    chains = 0
    for line in kills.read_text().splitlines():
        entry = json.loads(line)
        chains += 1
        suites[entry["suite"]] += len(entry["kills"])
        for kill in entry["kills"]:
            command, _, where = kill.partition("|")
            per[f"{command} on {entry['fixture']}"] += 1
            points[where.split(":")[0] if ":" in where else "outside"] += 1
    kills.unlink()
    done = {
        "chains": chains,
        "kills": sum(per.values()),
        "by_suite": dict(sorted(suites.items())),
        "by_command": dict(sorted(per.items())),
        "by_point": dict(sorted(points.items())),
    }
    SUMMARY.write_text(json.dumps(done, indent=2) + "\n")
    return done
