"""A full disk, simulated without root or mounts: the tidegate process runs under
RLIMIT_FSIZE (set in preexec_fn, SIGXFSZ ignored, so a write past the limit fails with EFBIG
like ENOSPC instead of killing the process).

- on the embedded default the SQLite ledger is the first file that cannot grow: one line that
  names the disk (not "restore a backup": the file is fine), a non-zero exit, nothing written;
- with the ledger in PostgreSQL (another process, outside the limit) the DuckDB warehouse is:
  the partitions whose publish cannot be written fail, none is half written, and a resume once
  there is room again finishes like a clean run."""

from __future__ import annotations

import resource
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.harness import MODEL, Partitions, assert_consistent, assert_converged
from tests.chaos.stores import Stores
from tests.engines.postgres_kit import fresh_database
from tests.faults.ledger import published_checksums
from tests.kit import (
    EXAMPLE_MODELS,
    Result,
    example_project,
    run_process,
    state_dump,
    tidegate,
    warehouse_dump,
)

RANGE = "2025-01-07..2025-03-20"
FIRST, END = "2025-01-07", "2025-03-21"
SQLITE_STATE = '[state]\npath = ".tidegate/state.db"\n'


def limited(limit: int, *args: str | Path) -> Result:
    """`tidegate ARGS` in a process that cannot write any file past `limit` bytes."""

    def no_bigger_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run(
        [sys.executable, "-m", "tidegate", *[str(a) for a in args]],
        preexec_fn=no_bigger_files,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def oracle(stores: Stores) -> Partitions:
    found: Partitions = {}
    for row in stores.warehouse(
        "SELECT CAST(order_ts AS DATE), status, count(*), sum(gross_amount), "
        "sum(gross_amount - discount - refund) FROM orders "
        "WHERE order_ts >= CAST(? AS TIMESTAMP) AND order_ts < CAST(? AS TIMESTAMP) "
        "GROUP BY 1, 2",
        [FIRST, END],
    ):
        found.setdefault(row[0], Counter())[tuple(row)] += 1
    return found


def test_a_full_disk_under_the_embedded_ledger_is_one_line_and_writes_nothing(
    project: Path,
) -> None:
    before = (state_dump(project), warehouse_dump(project))
    done = limited(8192, "backfill", MODEL, "--partitions", RANGE, "--project", project)
    assert done.exit_code == 1, done
    [line] = done.stderr.splitlines()
    assert "disk is full or failing" in line and ".tidegate/state.db" in line, line
    assert "restore" not in line, line
    assert (state_dump(project), warehouse_dump(project)) == before


@pytest.fixture
def ledger_dsn() -> Iterator[str]:
    with fresh_database() as dsn:
        yield dsn


@pytest.mark.postgres
def test_a_full_disk_under_the_warehouse_fails_partitions_whole_and_resumes_clean(
    tmp_path: Path, ledger_dsn: str
) -> None:
    clean = example_project(tmp_path / "clean")
    assert tidegate("backfill", MODEL, "--partitions", RANGE, "--project", clean).exit_code == 0
    project = example_project(tmp_path / "proj", deploy=False)
    shutil.rmtree(project / ".tidegate", ignore_errors=True)
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text().replace(
            SQLITE_STATE, f'[state]\nurl = "{ledger_dsn}"\nschema = "ledger"\n'
        )
    )
    assert tidegate("build", "--project", project).exit_code == 0
    for model in EXAMPLE_MODELS:
        assert tidegate("deploy", model, "--project", project).exit_code == 0
    stores = Stores(project, ledger_dsn=ledger_dsn)
    expected = oracle(stores)

    full = limited(
        16384, "backfill", MODEL, "--partitions", RANGE, "--batch-size", "5", "--project", project
    )
    assert full.exit_code == 1, full
    assert full.stderr.count("\n") == 1 and full.stderr.startswith("error: "), full.stderr
    assert "Traceback" not in full.stderr
    assert_consistent(stores, [expected], "after the disk filled up")
    [(run_id, status)] = stores.ledger("SELECT run_id, status FROM runs")
    assert status == "failed"
    failed = stores.ledger("SELECT error FROM attempts WHERE state = 'failed'")
    assert failed, "the disk never filled up: raise the workload or lower the limit"

    resumed = run_process("backfill", "resume", run_id, "--project", project, timeout=120)
    assert resumed.exit_code == 0, resumed.stderr
    checksums = {start: c for start, (_, c) in published_checksums(clean, MODEL).items()}
    assert_converged(stores, expected, checksums, "after the resume")
