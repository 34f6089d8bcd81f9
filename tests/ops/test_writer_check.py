"""A writer's start-up check: a warehouse changed behind the ledger's back (a dropped table, an
older copy restored) is found before anything is written, and what it lost is marked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.kit import state_dump, tidegate, warehouse_execute

MODEL = "daily_revenue"


def cli(project: Path, *args: str, code: int = 0) -> Any:
    result = tidegate(*args, "--project", project)
    assert result.exit_code == code, (args, result.stdout[-1500:], result.stderr)
    return result


def counts(project: Path) -> dict[str, int]:
    [model] = json.loads(cli(project, "status", MODEL, "--json").stdout)["models"]
    found: dict[str, int] = model["partitions"]
    return found


def state_of(project: Path, day: str) -> str:
    shown = json.loads(cli(project, "show", "partition", MODEL, day, "--json").stdout)
    return str(shown["state"])


def test_a_healthy_warehouse_is_not_touched_or_warned_about(project: Path) -> None:
    cli(project, "backfill", MODEL, "--partitions", "2025-01-01..2025-01-05")
    before = state_dump(project)
    done = cli(project, "run", MODEL, "--partition", "2025-01-05")
    assert "warning" not in done.stderr
    assert counts(project)["missing"] == counts(project)["diverged"] == 0
    after = state_dump(project)
    assert after["tainted_partitions"] == before["tainted_partitions"] == []


def test_a_dropped_table_is_marked_missing_by_the_next_writer_and_republished(
    project: Path,
) -> None:
    cli(project, "backfill", MODEL, "--partitions", "2025-01-01..2025-01-12")
    warehouse_execute(project, f"DROP TABLE {MODEL}")
    done = cli(project, "backfill", MODEL, "--partitions", "2025-01-13..2025-01-14")
    [warning] = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert "12 partition(s) in 2025-01-01..2025-01-12 (missing table)" in warning
    assert f"tidegate backfill {MODEL} --partitions 2025-01-01..2025-01-12 --stale-only" in warning
    assert counts(project)["missing"] == 12
    assert state_of(project, "2025-01-05") == "missing"
    assert state_of(project, "2025-01-13") == "published"
    # the table is back (the backfill created it) with the newest marker: the marks stay
    again = cli(project, "run", MODEL, "--partition", "2025-01-14")
    assert counts(project)["missing"] == 12
    assert "warning" not in again.stderr
    cli(project, "backfill", MODEL, "--partitions", "2025-01-01..2025-01-14", "--stale-only")
    assert counts(project)["missing"] == 0
    assert cli(project, "verify", MODEL).exit_code == 0


def test_an_older_copy_restored_is_found_by_its_lost_newest_marker(project: Path) -> None:
    cli(project, "backfill", MODEL, "--partitions", "2025-01-01..2025-01-05")
    warehouse = project / "warehouse.duckdb"
    kept = project.parent / "kept.duckdb"
    shutil.copyfile(warehouse, kept)
    cli(project, "backfill", MODEL, "--partitions", "2025-01-06..2025-01-10")
    shutil.copyfile(kept, warehouse)
    done = cli(project, "run", MODEL, "--partition", "2025-01-11")
    assert "5 partition(s) in 2025-01-06..2025-01-10 (missing marker)" in done.stderr
    assert [state_of(project, f"2025-01-{d:02}") for d in (5, 6, 10, 11)] == [
        "published",
        "missing",
        "missing",
        "published",
    ]
