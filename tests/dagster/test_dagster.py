"""The Dagster integration, run for real: the example definitions file
(examples/dagster/definitions.py) loaded by Dagster 1.13 in an environment of its own, its
assets materialized with `dagster.materialize()`, and the ledger read back with tidegate."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.dagster.kit import BAD_STATUS, dagster, dagster_python
from tests.kit import example_project, result_document, tidegate
from tests.ops.test_key_reconciliation import keyed_model
from tests.ops.test_whole_table import write_summary

pytestmark = [pytest.mark.dagster, pytest.mark.xdist_group("dagster")]


@pytest.fixture(scope="module", autouse=True)
def installed() -> Path:
    """Dagster, installed on first use: a failure to install fails every test here."""
    return dagster_python()


def ledger_runs(project: Path) -> list[tuple[str, str, str, str]]:
    """Every run in the project's ledger: (run id, kind, partitions, status)."""
    with sqlite3.connect(project / ".tidegate" / "state.db") as state:
        rows = state.execute("SELECT run_id, kind, partitions, status FROM runs ORDER BY run_id")
        return [tuple(r) for r in rows]


def by_partition(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["partition"]: m["metadata"] for m in report["materializations"]}


def test_the_asset_graph_follows_the_model_graph(tmp_path: Path) -> None:
    assets = dagster(example_project(tmp_path / "p"), "describe")["assets"]
    assert set(assets) == {"daily_revenue", "monthly_revenue", "revenue_report"}
    assert assets["daily_revenue"]["deps"] == []
    assert assets["monthly_revenue"]["deps"] == ["daily_revenue"]
    assert assets["revenue_report"]["deps"] == ["monthly_revenue"]
    daily, monthly = assets["daily_revenue"], assets["monthly_revenue"]
    assert daily["partitions"] == {
        "kind": "DailyPartitionsDefinition",
        "first": ["2025-01-01", "2025-01-02", "2025-01-03"],
    }
    assert monthly["partitions"] == {
        "kind": "MonthlyPartitionsDefinition",
        "first": ["2025-01", "2025-02", "2025-03"],
    }
    assert {a["backfill_policy"] for a in assets.values()} == {"BackfillPolicyType.SINGLE_RUN"}
    assert daily["checks"] == [
        "accepted_values_status",
        "net_not_above_gross",
        "unique_order_date_status",
    ]
    assert {a["group"] for a in assets.values()} == {"orders"}


def test_a_range_materialization_is_one_tidegate_backfill(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    report = dagster(project, "materialize", "daily_revenue", "2025-01-01", "2025-01-03")
    assert report["success"], report["failures"]

    runs = ledger_runs(project)
    assert [(kind, span, status) for _, kind, span, status in runs] == [
        ("backfill", "2025-01-01..2025-01-03", "succeeded")
    ]
    run_id = runs[0][0]
    shown = result_document(project, "show", "run", run_id)
    attempts = {a["partition"]: a for a in shown["attempts"] if a["state"] == "published"}
    materialized = by_partition(report)
    assert sorted(materialized) == ["2025-01-01", "2025-01-02", "2025-01-03"]
    assert [m["asset"] for m in report["materializations"]] == ["daily_revenue"] * 3
    for partition, found in materialized.items():
        attempt = attempts[partition]
        assert found["tidegate/run"] == run_id
        assert found["tidegate/version"] == attempt["version_id"]
        assert found["tidegate/checksum"] == attempt["checksum"]
        assert found["tidegate/attempt"] == attempt["attempt_id"]
        assert found["dagster/row_count"] == attempt["rows"] > 0

    checks = {c["name"]: c for c in report["checks"]}
    assert set(checks) == {
        "accepted_values_status",
        "net_not_above_gross",
        "unique_order_date_status",
    }
    for check in checks.values():
        assert check["asset"] == "daily_revenue" and check["passed"], check
        assert check["metadata"]["partitions"] == sorted(materialized)
        assert check["metadata"]["tidegate/run"] == run_id


def test_one_partition_is_a_backfill_of_that_partition(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    report = dagster(project, "materialize", "daily_revenue", "2025-01-05")
    assert report["success"], report["failures"]
    assert [(kind, span) for _, kind, span, _ in ledger_runs(project)] == [
        ("backfill", "2025-01-05")
    ]
    assert list(by_partition(report)) == ["2025-01-05"]


def test_a_refused_materialization_fails_with_tidegates_reason(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    assert tidegate("pause", "daily_revenue", "--project", project).exit_code == 0
    report = dagster(project, "materialize", "daily_revenue", "2025-01-01", "2025-01-02")
    assert not report["success"]
    assert report["materializations"] == [] and report["checks"] == []
    [failure] = report["failures"]
    assert "paused" in failure["description"]
    assert failure["metadata"]["tidegate/exit_code"] == 3
    # what tidegate itself says of the same call
    direct = result_document(
        project, "backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-02", code=3
    )
    assert failure["description"] == direct["error"]
    assert [r for r in ledger_runs(project) if r[3] == "succeeded"] == []


def test_a_failed_check_fails_the_run_and_reports_what_was_published(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    with duckdb.connect(str(project / "warehouse.duckdb")) as con:
        con.execute(BAD_STATUS)
    report = dagster(project, "materialize", "daily_revenue", "2025-01-01", "2025-01-04")
    assert not report["success"]
    [failure] = report["failures"]
    assert failure["metadata"]["tidegate/exit_code"] == 1
    assert report["retries"] == 0  # no retry policy in the example
    [(run_id, kind, _, status)] = ledger_runs(project)
    assert (kind, status) == ("backfill", "failed")
    assert failure["metadata"]["tidegate/run"] == run_id
    assert failure["description"] == result_document(project, "show", "run", run_id)["reason"]
    # the partitions published before the check failed are materializations all the same
    assert sorted(by_partition(report)) == ["2025-01-01", "2025-01-02"]
    checks = {c["name"]: c for c in report["checks"]}
    failed = checks["accepted_values_status"]
    assert not failed["passed"] and failed["metadata"]["failed_partitions"] == ["2025-01-03"]
    assert checks["unique_order_date_status"]["passed"]


RETRIED = """
from dagster import Definitions, RetryPolicy

from tidegate.dagster import tidegate_assets

defs = Definitions(assets=tidegate_assets(".", retry_policy=RetryPolicy(max_retries=1)))
"""


def test_a_retry_policy_retries_failures_and_never_refusals(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    definitions = tmp_path / "definitions.py"
    definitions.write_text(RETRIED)
    with duckdb.connect(str(project / "warehouse.duckdb")) as con:
        con.execute(BAD_STATUS)
    window = ("daily_revenue", "2025-01-01", "2025-01-04")
    failed = dagster(project, "materialize", *window, definitions=definitions)
    assert not failed["success"] and failed["retries"] == 1
    assert [(kind, status) for _, kind, _, status in ledger_runs(project)] == [
        ("backfill", "failed"),
        ("backfill", "failed"),
    ]
    assert tidegate("pause", "daily_revenue", "--project", project).exit_code == 0
    refused = dagster(project, "materialize", *window, definitions=definitions)
    assert not refused["success"] and refused["retries"] == 0
    [failure] = refused["failures"]
    assert failure["metadata"]["tidegate/exit_code"] == 3 and "paused" in failure["description"]


def test_a_whole_table_model_is_an_unpartitioned_asset(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    write_summary(project)
    assert tidegate("build", "--project", project).exit_code == 0
    assert tidegate("deploy", "customers_summary", "--project", project).exit_code == 0
    assert dagster(project, "describe")["assets"]["customers_summary"]["partitions"] is None

    report = dagster(project, "materialize", "customers_summary")
    assert report["success"], report["failures"]
    [(run_id, kind, span, _)] = ledger_runs(project)
    assert (kind, span) == ("backfill", "all")
    [materialized] = report["materializations"]
    assert materialized["partition"] is None
    assert materialized["metadata"]["tidegate/run"] == run_id
    assert {c["name"]: c["passed"] for c in report["checks"]} == {
        "unique_status": True,
        "few_statuses": True,
    }


def test_a_key_list_is_a_static_partitioning_of_the_declared_keys(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    (project / "models" / "by_status.sql").write_text(keyed_model())
    assert tidegate("build", "--project", project).exit_code == 0
    assert tidegate("deploy", "by_status", "--project", project).exit_code == 0
    described = dagster(project, "describe")["assets"]["by_status"]["partitions"]
    assert described == {
        "kind": "StaticPartitionsDefinition",
        "first": ["completed", "cancelled", "lost"],
    }

    report = dagster(project, "materialize", "by_status", "completed", "cancelled")
    assert report["success"], report["failures"]
    [(run_id, kind, span, _)] = ledger_runs(project)
    assert (kind, span) == ("backfill", "completed..cancelled")
    assert sorted(by_partition(report)) == ["cancelled", "completed"]
    assert {m["tidegate/run"] for m in by_partition(report).values()} == {run_id}
