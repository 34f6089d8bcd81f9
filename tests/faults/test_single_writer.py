"""docs/design.md §7: one writing process per DuckDB file. A second writer exits 4 at once (or waits
with --wait), writes nothing, and the ledger readers keep working while a writer holds the
warehouse.

The test process itself plays the other writer by holding the warehouse open read-write.
"""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

import duckdb

from tests.faults.ledger import oracle_between, published_checksums
from tests.kit import (
    assert_exactly_once,
    assert_no_staging,
    published_daily_revenue,
    run_process,
    spawn,
    state_dump,
    tidegate,
    warehouse_dump,
)

MODEL = "daily_revenue"
DAY = date(2025, 1, 1)
TIMEOUT = 20


@contextmanager
def warehouse_held(project: Path) -> Iterator[Any]:
    """Hold the project's warehouse open read-write, as another writer would."""
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        yield con
    finally:
        con.close()


def test_a_second_writer_exits_busy_at_once_and_writes_nothing(project: Path) -> None:
    before = state_dump(project)
    assert before["versions"], "the project should be built and deployed"
    warehouse_before = warehouse_dump(project)
    with warehouse_held(project):
        busy = run_process("run", MODEL, "--partition", str(DAY), "--project", project, timeout=20)
        after = state_dump(project)
    assert busy.exit_code == 4, (busy.stdout, busy.stderr)
    lines = busy.stderr.splitlines()
    assert len(lines) == 1, busy.stderr
    assert lines[0].startswith("error: ") and "--wait" in lines[0]
    assert "waiting for warehouse" not in busy.stderr
    assert after == before
    # and the warehouse got nothing either
    assert warehouse_dump(project) == warehouse_before


def test_ledger_readers_work_while_the_warehouse_is_held(project: Path) -> None:
    published = tidegate("run", MODEL, "--partition", str(DAY), "--project", project)
    assert published.exit_code == 0, published.stderr
    checksum = published_checksums(project, MODEL)

    with warehouse_held(project):
        status = run_process("status", "--project", project, "--json", timeout=TIMEOUT)
        status_one = run_process("status", MODEL, "--project", project, "--json", timeout=TIMEOUT)
        shown = run_process(
            "show", "partition", MODEL, str(DAY), "--project", project, "--json", timeout=TIMEOUT
        )
    assert status.exit_code == 0, status.stderr
    counts = {m["model"]: m["partitions"] for m in status.json()["models"]}
    assert counts[MODEL]["published"] == 1
    assert status_one.exit_code == 0, status_one.stderr
    assert [r["range"] for r in status_one.json()["models"][0]["ranges"]] == [str(DAY)]
    assert shown.exit_code == 0, shown.stderr
    document = shown.json()
    assert document["state"] == "published"
    assert [(document["published"]["rows"], document["published"]["checksum"])] == list(
        checksum.values()
    )


def _lines(stream: Any, into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def test_a_waiting_writer_proceeds_once_the_warehouse_is_released(project: Path) -> None:
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []
    with warehouse_held(project) as con:
        process = spawn("run", MODEL, "--partition", str(DAY), "--project", project, "--wait")
        try:
            reader = threading.Thread(target=_lines, args=(process.stderr, lines), daemon=True)
            reader.start()
            while not (seen and seen[-1].startswith("waiting for warehouse")):
                try:
                    line = lines.get(timeout=TIMEOUT)
                except queue.Empty:
                    raise AssertionError(f"no 'waiting for warehouse' line in {TIMEOUT}s") from None
                assert line is not None, f"stderr closed before waiting: {seen}"
                seen.append(line)
            assert process.poll() is None, "the waiting writer exited while the warehouse was held"
            assert con.execute("SELECT count(*) FROM orders").fetchone()[0] > 0
        except BaseException:
            process.kill()
            process.wait(timeout=TIMEOUT)
            raise
    # released: the waiting writer takes the warehouse and finishes
    try:
        code = process.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    reader.join(timeout=TIMEOUT)
    while (line := lines.get(timeout=TIMEOUT)) is not None:
        seen.append(line)
    stdout = process.stdout.read() if process.stdout else ""
    assert code == 0, (stdout, seen)
    assert sum(1 for line in seen if line.startswith("waiting for warehouse")) == 1, seen

    assert list(published_checksums(project, MODEL)) != []
    assert_exactly_once(published_daily_revenue(project), oracle_between(project, DAY, DAY))
    assert_no_staging(project)
