"""Exactly once into Iceberg tables from Spark: kill -9 a real `tidegate backfill` of a Spark
project publishing into Iceberg tables at the points around its publish, read main from outside
(pyiceberg alone) before anything resumes, then resume and compare with a clean run.

Before the resume, main holds whole partitions only. A publish killed with its branch written
leaves that branch, which no reader follows; other Spark processes may be publishing, so the
next writer leaves branches alone and `tidegate maintain` removes them once older than `keep`,
with the files the dead publish wrote."""

from __future__ import annotations

import signal
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.engines.spark_kit import LOCATION, spark_project
from tests.faults.backfill_kit import listed_backfills
from tests.faults.ledger import assert_ledger_matches_markers, live_attempts, published_checksums
from tests.iceberg.test_crash import (
    EXPECTED,
    MODEL,
    branches,
    days_between,
    main_markers,
    main_rows,
)
from tests.iceberg.test_spark_project import ICEBERG, ROWS_PER_DAY, oracle_rows
from tests.kit import assert_exactly_once, run_process, tidegate
from tidegate.crash import ENVIRONMENT_VARIABLE

pytestmark = [pytest.mark.spark, pytest.mark.crash, pytest.mark.xdist_group("spark")]

FIRST, LAST = date(2025, 1, 1), date(2025, 1, 4)
KILLED_DAY = FIRST + timedelta(days=2)  # the third partition: TIDEGATE_CRASH_AT=<point>:3
COMMAND = (
    "backfill", MODEL, "--partitions", f"{FIRST}..{LAST}", "--batch-size", "1",
    "--max-concurrency", "1",
)  # fmt: skip


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    """An uninterrupted run: the ledger's per-partition checksums, and main's rows."""
    project = spark_project(
        tmp_path_factory.mktemp("clean") / "proj", rows_per_day=ROWS_PER_DAY, more=ICEBERG
    )
    result = tidegate(*COMMAND, "--project", project)
    assert result.exit_code == 0, result.stderr
    rows = main_rows(project)
    assert rows == oracle_rows(project, days_between(FIRST, LAST))
    return published_checksums(project, MODEL), rows


@pytest.mark.parametrize("point", sorted(EXPECTED))
def test_a_killed_spark_publish_into_iceberg_resumes_to_a_clean_run(
    point: str, tmp_path: Path, clean: tuple[Any, Any]
) -> None:
    committed, branch_left = EXPECTED[point]
    project = spark_project(tmp_path / "proj", rows_per_day=ROWS_PER_DAY, more=ICEBERG)
    crashed = run_process(
        *COMMAND, "--project", project, env={ENVIRONMENT_VARIABLE: f"{point}:3"}, timeout=240
    )
    assert crashed.exit_code == -signal.SIGKILL, (crashed.exit_code, crashed.stderr)

    published = days_between(FIRST, KILLED_DAY if committed else KILLED_DAY - timedelta(days=1))
    on_main = main_rows(project)
    assert {row[0] for row in on_main} == published
    assert on_main == oracle_rows(project, published)
    left = branches(project)
    assert len(left) == (1 if branch_left else 0), left
    [pending] = live_attempts(project)

    [listed] = listed_backfills(project)
    resumed = tidegate("backfill", "resume", listed["run_id"], "--project", project, "--json")
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.json()["status"] == "succeeded"

    checksums, rows = clean
    final = main_rows(project)
    assert final == rows
    assert_exactly_once(final, oracle_rows(project, days_between(FIRST, LAST)))
    assert published_checksums(project, MODEL) == checksums
    assert assert_ledger_matches_markers(project, MODEL, main_markers(project)) == 4
    assert live_attempts(project) == []
    shown = tidegate("show", "run", listed["run_id"], "--project", project, "--json")
    states = {a["attempt_id"]: a["state"] for a in shown.json()["attempts"]}
    assert states[pending[0]] == ("published" if committed else "failed")

    # what the dead publish left goes with maintenance once older than `keep`
    maintained = tidegate("maintain", "--as-of", "2099-01-01T00:00:00", "--project", project)
    assert maintained.exit_code == 0, maintained.stderr
    assert branches(project) == []
    assert main_rows(project) == rows
    written = project / LOCATION / "analytics" / MODEL / "data"
    referenced = {Path(f).name for f in _main_files(project)}
    assert {f.name for f in written.rglob("*.parquet")} == referenced


def _main_files(project: Path) -> list[str]:
    from tests.iceberg.kit import NAMESPACE, outside_catalog

    with outside_catalog(project) as catalog:
        table = catalog.load_table((NAMESPACE, MODEL))
        return [task.file.file_path for task in table.scan().plan_files()]
