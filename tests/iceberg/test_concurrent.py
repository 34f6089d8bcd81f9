"""Two writer processes publishing into one Iceberg table of a SQLite catalog at once
(IcebergTables directly, tests/iceberg/concurrent_writer.py): different partitions both land,
the same partition lands once and the other writer is told; and a branch a killed writer left
is removed without touching main.

The race is made deterministic by the first writer's audit: it tells the test it reached the
audit (its branch written, main not moved) and waits for a line on stdin; the second writer
runs to its end meanwhile, so the first always finds main moved."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from tests.iceberg.concurrent_writer import (
    NAMESPACE,
    ROWS_PER_PUBLISH,
    TABLE,
    create_table,
    rows_of,
)
from tests.iceberg.kit import sqlite_place
from tests.kit import REPO
from tidegate.engines.iceberg_tables import MEANWHILE, IcebergTables

DAY_ONE, DAY_TWO = date(2025, 1, 1), date(2025, 1, 2)
TIMEOUT = 60.0


def writer(folder: Path, day: date, amount: int, attempt: str, hold: bool) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.iceberg.concurrent_writer",
            str(folder),
            day.isoformat(),
            str(amount),
            attempt,
            *(["--hold"] if hold else []),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )


def reached_audit(process: subprocess.Popen[str]) -> None:
    """Block until the held writer says it is in its audit (bounded, not a sleep)."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], TIMEOUT)
    if not ready:
        process.kill()
        raise AssertionError("the first writer never reached its audit")
    line = process.stdout.readline()
    if line.strip() != "audit":
        process.kill()
        _, stderr = process.communicate()
        raise AssertionError(f"the first writer said {line!r}: {stderr}")


def outcome(process: subprocess.Popen[str], release: bool = False) -> tuple[int, dict[str, Any]]:
    """Let a held writer go on (`release`), wait for its end: (exit code, its outcome)."""
    stdout, stderr = process.communicate("go\n" if release else None, timeout=TIMEOUT)
    lines = stdout.strip().splitlines()
    assert lines, f"the writer printed nothing (exit {process.returncode}): {stderr}"
    return process.returncode, json.loads(lines[-1])


def race(
    folder: Path, first: tuple[date, int, str], second: tuple[date, int, str]
) -> tuple[tuple[int, dict[str, Any]], tuple[int, dict[str, Any]]]:
    """The first writer forks its branch and holds in its audit; the second publishes to its
    end; then the first goes on, main having moved since its fork."""
    held = writer(folder, *first, hold=True)
    try:
        reached_audit(held)
        second_done = outcome(writer(folder, *second, hold=False))
        first_done = outcome(held, release=True)
    finally:
        if held.poll() is None:
            held.kill()
            held.wait()
    return first_done, second_done


# an outside reader: pyiceberg alone ---------------------------------------------------------


def catalog(folder: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    lake = (folder / "lake").resolve()
    return SqlCatalog("tidegate", uri=f"sqlite:///{lake / 'catalog.db'}", warehouse=lake.as_uri())


def read_main(folder: Path) -> tuple[Counter[tuple[Any, ...]], set[str], list[str], int | None]:
    """Main's rows (as a multiset of (day, amount)), the attempts its snapshots name, the
    table's refs, main's snapshot id."""
    opened = catalog(folder)
    try:
        table = opened.load_table((NAMESPACE, TABLE))
        rows = table.scan().to_arrow().to_pylist()
        attempts: set[str] = set()
        snapshot = table.current_snapshot()
        while snapshot is not None:
            text = snapshot.summary.additional_properties.get("tidegate.attempts", "")
            attempts |= {a for a in text.split(",") if a}
            parent = snapshot.parent_snapshot_id
            snapshot = None if parent is None else table.snapshot_by_id(parent)
        return (
            Counter((r["day"], r["amount"]) for r in rows),
            attempts,
            sorted(table.refs()),
            table.metadata.current_snapshot_id,
        )
    finally:
        opened.engine.dispose()


def published(day: date, amount: int) -> Counter[tuple[Any, ...]]:
    return Counter({(day, amount): ROWS_PER_PUBLISH})


# the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("republish", [False, True], ids=["first publish", "republish"])
def test_two_writers_of_different_partitions_both_publish(tmp_path: Path, republish: bool) -> None:
    create_table(tmp_path)
    if republish:  # both days hold rows already: each writer replaces its own day's files
        for day, attempt in ((DAY_ONE, "att-old-one"), (DAY_TWO, "att-old-two")):
            code, done = outcome(writer(tmp_path, day, 5, attempt, hold=False))
            assert code == 0, done

    (first_code, first), (second_code, second) = race(
        tmp_path, (DAY_ONE, 1, "att-one"), (DAY_TWO, 2, "att-two")
    )

    assert (first_code, second_code) == (0, 0), (first, second)
    # the held writer found main moved and applied its audited files onto it
    assert (first["moved"], second["moved"]) == (True, False)
    rows, attempts, refs, head = read_main(tmp_path)
    assert rows == published(DAY_ONE, 1) + published(DAY_TWO, 2)
    assert {"att-one", "att-two"} <= attempts
    assert refs == ["main"]
    # the first writer's rows were applied onto the second's main: main's head is the first's
    assert head == first["published"]


def test_two_writers_of_the_same_partition_publish_it_once(tmp_path: Path) -> None:
    create_table(tmp_path)

    (first_code, first), (second_code, second) = race(
        tmp_path, (DAY_ONE, 1, "att-loser"), (DAY_ONE, 2, "att-winner")
    )

    assert second_code == 0, second
    assert first_code == 3, first
    assert MEANWHILE in first["error"]
    rows, attempts, refs, head = read_main(tmp_path)
    assert rows == published(DAY_ONE, 2)
    assert attempts == {"att-winner"}
    assert refs == ["main"]
    assert head == second["published"]


def test_a_branch_left_by_a_killed_writer_is_removed_and_main_kept(tmp_path: Path) -> None:
    create_table(tmp_path)
    code, done = outcome(writer(tmp_path, DAY_ONE, 1, "att-kept", hold=False))
    assert code == 0, done
    before = read_main(tmp_path)

    # what a writer killed with its branch written leaves: a branch off main holding new rows
    # for the same day, and its markers; and a branch of someone else's, which is no leftover
    left = IcebergTables(sqlite_place(tmp_path, NAMESPACE))
    try:
        table = left.load(TABLE, fresh=True)
        assert table is not None
        base = table.metadata.current_snapshot_id
        assert base is not None
        for branch in ("tidegate-x", "audit-by-someone"):
            table.manage_snapshots().create_branch(base, branch).commit()
        table.overwrite(
            rows_of(DAY_ONE, 9),
            snapshot_properties={"tidegate.attempts": "att-dead"},
            branch="tidegate-x",
        )
    finally:
        left.close()
    assert read_main(tmp_path)[3] == before[3]

    tables = IcebergTables(sqlite_place(tmp_path, NAMESPACE))
    try:
        removed = tables.remove_leftover_branches()
        again = tables.remove_leftover_branches()
    finally:
        tables.close()

    assert removed == [f"{NAMESPACE}.{TABLE}@tidegate-x"]
    assert again == []
    rows, attempts, refs, head = read_main(tmp_path)
    assert (rows, attempts, head) == (before[0], before[1], before[3])
    assert rows == published(DAY_ONE, 1)
    assert refs == ["audit-by-someone", "main"]
