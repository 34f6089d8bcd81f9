"""What the operator makes of tidegate, without Airflow: exit codes as task outcomes, a detached
run's status as an exit code, the asset's name, partition labels as keys, and the XCom values."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.kit import example_project
from tidegate import orchestration
from tidegate.airflow.keys import key_format
from tidegate.airflow.naming import asset_uri, partition_key, project_name
from tidegate.airflow.outcomes import (
    Verdict,
    exit_code_of_status,
    partitions_of,
    summary,
    verdict,
)
from tidegate.domain.partitions import Grain, PartitionKey, floor, following, to_epoch
from tidegate.orchestration import Outcome, PublishedPartition


def test_exit_codes_map_onto_task_outcomes() -> None:
    assert [verdict(code) for code in range(6)] == [
        Verdict.SUCCEEDED,
        Verdict.RETRY,
        Verdict.FAIL,
        Verdict.FAIL,
        Verdict.BUSY,
        Verdict.SKIP,
    ]
    assert verdict(137) is Verdict.RETRY  # killed: worth another try


def test_a_detached_runs_status_is_the_exit_code_it_stands_for() -> None:
    assert exit_code_of_status("succeeded") == orchestration.SUCCEEDED
    assert exit_code_of_status("stopped") == orchestration.STOPPED
    assert exit_code_of_status("failed") == orchestration.FAILED
    assert exit_code_of_status("interrupted") == orchestration.FAILED
    assert exit_code_of_status("error") == orchestration.FAILED


def test_the_asset_is_named_by_project_and_model(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p", deploy=False)
    assert project_name(project) == "orders"
    assert asset_uri("orders", "daily_revenue") == "tidegate://orders/daily_revenue"
    with pytest.raises(ValueError, match="no `/`"):
        asset_uri("a/b", "m")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "tidegate.toml").write_text("[warehouse]\nengine = 'duckdb'\n")
    with pytest.raises(ValueError, match="names no project"):
        project_name(tmp_path / "bare")
    with pytest.raises(ValueError, match="cannot read"):
        project_name(tmp_path / "missing")


def test_partition_labels_are_the_keys_within_airflows_limit() -> None:
    assert partition_key("2025-01-01") == "2025-01-01"
    assert partition_key("k" * 250) == "k" * 250
    for bad in ("", "  ", "k" * 251):
        with pytest.raises(ValueError, match="1 to 250"):
            partition_key(bad)


@pytest.mark.parametrize("grain", ["hour", "day", "month"])
def test_a_time_grains_key_format_writes_tidegates_labels(grain: str) -> None:
    moment = to_epoch(datetime(2025, 3, 9, 17, 45, tzinfo=timezone.utc))
    start = floor(Grain(grain), moment)
    label = PartitionKey(Grain(grain), start, following(Grain(grain), start)).label()
    written = datetime.fromtimestamp(moment, tz=timezone.utc).strftime(key_format(grain))
    assert written == label


def test_only_time_grains_have_a_key_format() -> None:
    for grain in Grain:
        if grain.is_time:
            assert key_format(grain.value)
        else:
            with pytest.raises(ValueError, match="time grains"):
                key_format(grain.value)
    with pytest.raises(ValueError, match="time grains"):
        key_format("week")


def test_the_summary_holds_run_versions_and_checksums() -> None:
    done = [
        PublishedPartition("m", "2025-01-02", "v2", 5, "c2", "a2"),
        PublishedPartition("m", "2025-01-01", "v1", 3, "c1", "a1"),
        PublishedPartition("up", "2025-01-01", "u1", 7, "x1", "a3"),
    ]
    values = summary("backfill", "m", Outcome(0, {"run_id": "run-1"}), done)
    assert values["run_id"] == "run-1" and values["exit_code"] == 0
    assert values["versions"] == ["u1", "v1", "v2"]
    assert values["checksums"] == {
        "m": {"2025-01-01": "c1", "2025-01-02": "c2"},
        "up": {"2025-01-01": "x1"},
    }
    assert partitions_of("m", values) == ["2025-01-01", "2025-01-02"]
    assert values["published"][0] == {
        "model": "m",
        "partition": "2025-01-01",
        "version_id": "v1",
        "rows": 3,
        "checksum": "c1",
    }
