"""The Dagster integration's mapping, without Dagster: grains to partitionings whose keys are
tidegate's labels, partition key ranges to commands, exit codes to retries, and a real run's
`show run` document to materialization metadata and check outcomes."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from tests.dagster.kit import BAD_STATUS
from tests.kit import REPO, example_project, result_document
from tidegate.dagster.partitioning import Kind, partitioning
from tidegate.dagster.requests import request
from tidegate.dagster.results import ROW_COUNT, check_outcomes, metadata, published_partitions
from tidegate.domain.partitions import Grain, PartitionKey, following, to_epoch
from tidegate.project.loader import load_project


def test_time_grains_are_time_partitions_whose_keys_are_tidegate_labels(tmp_path: Path) -> None:
    project = load_project(example_project(tmp_path / "p", deploy=False))
    daily = partitioning(project.model("daily_revenue"))
    monthly = partitioning(project.model("monthly_revenue"))
    assert (daily.kind, daily.start, daily.fmt) == (Kind.DAILY, "2025-01-01", "%Y-%m-%d")
    assert (monthly.kind, monthly.start, monthly.fmt) == (Kind.MONTHLY, "2025-01", "%Y-%m")
    hourly = partitioning(replace(project.model("daily_revenue"), grain=Grain.HOUR))
    assert hourly.kind is Kind.HOURLY
    for grain, found in ((Grain.DAY, daily), (Grain.MONTH, monthly), (Grain.HOUR, hourly)):
        assert found.fmt is not None
        for moment in (datetime(2025, 1, 1), datetime(2025, 12, 31, 23), datetime(2024, 2, 29, 7)):
            start = to_epoch(moment.replace(tzinfo=timezone.utc))
            if grain is Grain.MONTH:
                start = to_epoch(moment.replace(day=1, hour=0, tzinfo=timezone.utc))
            elif grain is Grain.DAY:
                start = to_epoch(moment.replace(hour=0, tzinfo=timezone.utc))
            label = PartitionKey(grain, start, following(grain, start)).label()
            assert moment.strftime(found.fmt) == label


def test_key_lists_are_static_and_the_rest_unpartitioned(tmp_path: Path) -> None:
    spec = load_project(example_project(tmp_path / "p", deploy=False)).model("daily_revenue")
    keyed = partitioning(replace(spec, grain=Grain.KEY, keys=("eu", "us", "apac")))
    assert (keyed.kind, keyed.keys) == (Kind.STATIC, ("eu", "us", "apac"))
    for grain in (Grain.TABLE, Grain.CURSOR, Grain.RANGE):
        assert not partitioning(replace(spec, grain=grain)).partitioned
    assert not partitioning(replace(spec, start=None)).partitioned


def test_a_key_range_is_one_backfill_and_an_unpartitioned_asset_a_tick(tmp_path: Path) -> None:
    root = example_project(tmp_path / "p", deploy=False)
    spec = load_project(root).model("daily_revenue")
    ranged = request(spec, root, ("2025-01-01", "2025-01-03"), ("--batch-size", "7"))
    assert ranged.arguments()[:4] == [
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-01-01..2025-01-03",
    ]
    assert "--batch-size" in ranged.arguments()
    one = request(spec, root, ("2025-01-02", "2025-01-02"))
    assert one.arguments()[:4] == ["backfill", "daily_revenue", "--partitions", "2025-01-02"]
    whole = request(replace(spec, grain=Grain.TABLE), root, None)
    assert whole.arguments()[:4] == ["backfill", "daily_revenue", "--partitions", "all"]
    tick = request(replace(spec, grain=Grain.CURSOR), root, None, ("--batch-size", "7"))
    assert tick.arguments() == ["run", "daily_revenue", "--project", str(root), "--json"]


def test_a_runs_metadata_and_checks_come_from_its_show_run_document(tmp_path: Path) -> None:
    root = example_project(tmp_path / "p")
    with duckdb.connect(str(root / "warehouse.duckdb")) as con:
        con.execute(BAD_STATUS)
    window = ("backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-04")
    done = result_document(root, *window, code=1)
    run = result_document(root, "show", "run", done["run_id"])
    spec = load_project(root).model("daily_revenue")

    published = published_partitions(run, "daily_revenue")
    # the failed check halts the backfill (its default stop-loss): 4 January is not attempted
    assert [p.partition for p in published] == ["2025-01-01", "2025-01-02"]
    first = metadata(done["run_id"], published[0])
    attempt = next(a for a in run["attempts"] if a["partition"] == "2025-01-01")
    assert first["tidegate/version"] == attempt["version_id"]
    assert first["tidegate/checksum"] == attempt["checksum"]
    assert first[ROW_COUNT] == attempt["rows"] and first["tidegate/run"] == done["run_id"]

    outcomes = {o.name: o for o in check_outcomes(run, "daily_revenue", spec.checks)}
    assert set(outcomes) == {c.name for c in spec.checks}
    failed = outcomes["accepted_values_status"]
    assert not failed.passed and failed.failed_partitions == ("2025-01-03",)
    assert failed.partitions == ("2025-01-01", "2025-01-02", "2025-01-03")
    assert outcomes["unique_order_date_status"].passed
    assert check_outcomes({"attempts": []}, "daily_revenue", spec.checks) == []


def test_the_core_install_imports_no_dagster() -> None:
    code = (
        "import sys\n"
        "import tidegate.cli, tidegate.dagster, tidegate.dagster.partitioning\n"
        "import tidegate.dagster.requests, tidegate.dagster.results\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dagster'"
        " or m == 'tidegate.dagster.assets'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "src")},
        check=True,
    )
    assert done.stdout.strip() == "[]"
