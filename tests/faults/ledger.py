"""Small readers of the ledger (SQLite) and the warehouse markers, for the fault tests.

They read the stores directly rather than through tidegate, so a test can check what a dead
process left behind and whether the two stores agree.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

from tests.kit import oracle_daily_revenue, warehouse_rows
from tidegate.domain.checksum import row_hash

LIVE_STATES = ("pending", "running", "staged", "audited")
T = TypeVar("T")


def ledger_rows(project: Path, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(project / ".tidegate" / "state.db", timeout=10)
    try:
        return list(con.execute(query, params).fetchall())
    finally:
        con.close()


def live_attempts(project: Path) -> list[tuple[str, str, str]]:
    """(attempt_id, run_id, state) of every attempt not in a terminal state."""
    return ledger_rows(
        project,
        "SELECT attempt_id, run_id, state FROM attempts WHERE state IN (?, ?, ?, ?) "
        "ORDER BY attempt_id",
        LIVE_STATES,
    )


def runs_with_status(project: Path, status: str) -> list[str]:
    return [
        r[0]
        for r in ledger_rows(
            project, "SELECT run_id FROM runs WHERE status = ? ORDER BY run_id", (status,)
        )
    ]


def published_checksums(project: Path, model: str) -> dict[int, tuple[int, str]]:
    """partition_start -> (rows, checksum) of every partition the ledger says is published."""
    rows = ledger_rows(
        project,
        "SELECT partition_start, row_count, checksum FROM partitions "
        "WHERE model = ? AND attempt_id IS NOT NULL",
        (model,),
    )
    return {start: (count, checksum) for start, count, checksum in rows}


def assert_ledger_matches_markers(
    project: Path, model: str, markers: list[tuple[Any, ...]] | None = None
) -> int:
    """Every published partition in the ledger has the newest warehouse marker for it, with the
    same attempt, run, version and checksum. Returns how many partitions were compared.

    `markers`: the model's markers as (partition_start, attempt_id, run_id, version_id,
    checksum, published_at), for a warehouse that keeps them elsewhere than the DuckDB marker
    table (Iceberg tables keep them in their snapshots); read from that table by default."""
    ledger = ledger_rows(
        project,
        "SELECT partition_start, attempt_id, run_id, version_id, checksum FROM partitions "
        "WHERE model = ? AND attempt_id IS NOT NULL ORDER BY partition_start",
        (model,),
    )
    if markers is None:
        markers = warehouse_rows(
            project,
            "SELECT partition_start, attempt_id, run_id, version_id, checksum, published_at "
            "FROM _tidegate.commit_markers WHERE model = ?",
            [model],
        )
    newest: dict[int, tuple[Any, ...]] = {}
    by_attempt = {m[1]: m for m in markers}
    for marker in markers:
        if marker[0] not in newest or marker[5] > newest[marker[0]][5]:
            newest[marker[0]] = marker
    assert ledger, f"the ledger has no published partition of {model}"
    for start, attempt_id, run_id, version_id, checksum in ledger:
        named = by_attempt.get(attempt_id)
        assert named is not None, f"{model}@{start}: attempt {attempt_id} has no commit marker"
        assert named[:5] == (start, attempt_id, run_id, version_id, checksum), (
            f"{model}@{start}: ledger {(attempt_id, run_id, version_id, checksum)} "
            f"disagrees with marker {named}"
        )
        assert newest[start][1] == attempt_id, (
            f"{model}@{start}: the ledger names {attempt_id} but the newest marker is "
            f"{newest[start][1]}"
        )
    # and no partition has a marker that the ledger does not know as published
    assert set(newest) == {row[0] for row in ledger}
    return len(ledger)


def oracle_between(project: Path, first: date, last: date) -> list[tuple[Any, ...]]:
    """The independent GROUP BY over orders, restricted to days first..last inclusive."""
    return [row for row in oracle_daily_revenue(project) if first <= row[0] <= last]


def recomputed_checksum(project: Path, day: date) -> str:
    """The checksum of one published day of daily_revenue, recomputed in Python from the
    warehouse rows: (row count, sum of 64-bit MD5 prefixes of the formatted rows mod 2^64)."""
    columns = ("order_date", "status", "order_count", "gross_revenue", "net_revenue")
    rendered = ", ".join(f"CAST({c} AS VARCHAR)" for c in columns)
    rows = warehouse_rows(
        project, f"SELECT {rendered} FROM daily_revenue WHERE order_date = ?", [day]
    )
    total = sum(row_hash(row) for row in rows)
    return f"{len(rows)}:{total % 2**64:016x}"


def wait_until(what: str, probe: Callable[[], T | None], timeout: float = 20.0) -> T:
    """Poll another process's externally visible state until `probe` returns a value.

    Bounded: fails the test after `timeout` seconds instead of hanging.
    """
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)
