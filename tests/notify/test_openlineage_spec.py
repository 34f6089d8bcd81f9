"""Every OpenLineage event a run sends validates against the 2-0-2 spec and the definitions of
its standard facets (tests/notify/data/openlineage-run-event.schema.json), names its datasets
as OpenLineage's naming conventions do, and carries the facets other tools read: the partitions
as a subset, the window as nominal time, the orchestrator's run as parent, the rows, the
columns and the checks."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import jsonschema
import pytest

from tests.faults.ledger import wait_until
from tests.kit import tidegate, warehouse_execute
from tests.notify.openlineage_kit import events, validate, with_lineage_file

PARENT_RUN = "3f0c8b8e-6a57-4a53-9c1c-2b7e6b1f0a11"
ROOT_RUN = "0d6e5a52-51a4-4d2b-8f7e-5f1c6c2b9e33"


def test_a_backfill_under_an_orchestrator_sends_valid_events_with_the_standard_facets(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lineage = with_lineage_file(project)
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", f"airflow/orders_dag.backfill/{PARENT_RUN}")
    monkeypatch.setenv("OPENLINEAGE_ROOT_PARENT_ID", f"airflow/orders_dag/{ROOT_RUN}")
    done = tidegate(
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-01-01..2025-01-03",
        "--json",
        "--project",
        project,
    )
    assert done.exit_code == 0, done.stderr
    run = tidegate("show", "run", done.json()["run_id"], "--json", "--project", project).json()
    sent = events(lineage)
    assert [e["eventType"] for e in sent] == ["START", "COMPLETE"]
    for event in sent:
        validate(event)
        parent = event["run"]["facets"]["parent"]
        assert parent["run"]["runId"] == PARENT_RUN
        assert (parent["job"]["namespace"], parent["job"]["name"]) == (
            "airflow",
            "orders_dag.backfill",
        )
        assert parent["root"]["run"]["runId"] == ROOT_RUN
        assert event["job"]["facets"]["jobType"]["processingType"] == "BATCH"
    complete = sent[1]
    assert complete["run"]["facets"]["nominalTime"]["nominalStartTime"].startswith(
        "2025-01-01T00:00:00"
    )
    assert complete["run"]["facets"]["nominalTime"]["nominalEndTime"].startswith(
        "2025-01-04T00:00:00"
    )
    warehouse = (project / "warehouse.duckdb").resolve()
    [read] = complete["inputs"]
    assert (read["namespace"], read["name"]) == (f"duckdb://{warehouse}", "warehouse.main.orders")
    [wrote] = complete["outputs"]
    assert (wrote["namespace"], wrote["name"]) == (
        f"duckdb://{warehouse}",
        "warehouse.main.daily_revenue",
    )
    partitions = wrote["outputFacets"]["subset"]["outputCondition"]["partitions"]
    assert partitions == [
        {
            "identifier": "2025-01-01..2025-01-03",
            "dimensions": {"order_date": "2025-01-01..2025-01-03"},
        }
    ]
    rows = sum(a["rows"] for a in run["attempts"] if a["state"] == "published")
    assert rows > 0 and wrote["outputFacets"]["outputStatistics"]["rowCount"] == rows
    columns = [f["name"] for f in wrote["facets"]["schema"]["fields"]]
    assert columns == ["order_date", "status", "order_count", "gross_revenue", "net_revenue"]
    checks = {a["name"]: a for a in wrote["facets"]["dataQualityAssertions"]["assertions"]}
    assert "net_not_above_gross" in checks
    assert all(a["success"] for a in checks.values())


def test_a_failed_check_is_a_valid_fail_event_naming_the_assertion(project: Path) -> None:
    lineage = with_lineage_file(project)
    warehouse_execute(
        project, "UPDATE orders SET status = 'lost' WHERE CAST(order_ts AS DATE) = '2025-01-02'"
    )
    failed = tidegate(
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-01-01..2025-01-02",
        "--project",
        project,
    )
    assert failed.exit_code == 1, failed.stderr
    sent = events(lineage)
    assert [e["eventType"] for e in sent] == ["START", "FAIL"]
    for event in sent:
        validate(event)
        assert "parent" not in event["run"]["facets"]
    fail = sent[1]
    assert fail["run"]["facets"]["errorMessage"]["message"]
    [wrote] = fail["outputs"]
    checks = {a["name"]: a for a in wrote["facets"]["dataQualityAssertions"]["assertions"]}
    failing = [a for a in checks.values() if not a["success"]]
    assert [a["assertion"] for a in failing] == ["accepted_values"]
    assert failing[0]["column"] == "status"


def test_a_model_read_downstream_has_the_same_name_as_the_table_written(project: Path) -> None:
    lineage = with_lineage_file(project)
    for model, span in (
        ("daily_revenue", "2025-01-01..2025-01-31"),
        ("monthly_revenue", "2025-01..2025-01"),
    ):
        done = tidegate("backfill", model, "--partitions", span, "--project", project)
        assert done.exit_code == 0, done.stderr
    sent = events(lineage)
    for event in sent:
        validate(event)
    completes = {e["job"]["name"]: e for e in sent if e["eventType"] == "COMPLETE"}
    written = completes["daily_revenue"]["outputs"][0]
    read = completes["monthly_revenue"]["inputs"]
    assert (written["namespace"], written["name"]) in {(d["namespace"], d["name"]) for d in read}


def test_a_malformed_parent_is_left_out(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lineage = with_lineage_file(project)
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", "airflow/no-run-id")
    done = tidegate("run", "daily_revenue", "--partition", "2025-01-01", "--project", project)
    assert done.exit_code == 0, done.stderr
    for event in events(lineage):
        validate(event)
        assert "parent" not in event["run"]["facets"]
    assert uuid.UUID(events(lineage)[0]["run"]["runId"])


def test_the_schema_refuses_what_the_spec_refuses(project: Path) -> None:
    lineage = with_lineage_file(project)
    done = tidegate("run", "daily_revenue", "--partition", "2025-01-01", "--project", project)
    assert done.exit_code == 0, done.stderr
    complete = events(lineage)[-1]
    validate(complete)
    without_run_id = {**complete, "run": {"facets": {}}}
    with pytest.raises(jsonschema.ValidationError, match="runId"):
        validate(without_run_id)
    bad_uuid = {**complete, "run": {"runId": "run-1"}}
    with pytest.raises(jsonschema.ValidationError, match="uuid"):
        validate(bad_uuid)
    output = complete["outputs"][0]
    statistics = output["outputFacets"]["outputStatistics"]
    broken = {**output, "outputFacets": {"outputStatistics": {**statistics, "rowCount": "many"}}}
    with pytest.raises(jsonschema.ValidationError, match="many"):
        validate({**complete, "outputs": [broken]})
    unproduced = {k: v for k, v in statistics.items() if k != "_producer"}
    with pytest.raises(jsonschema.ValidationError, match="_producer"):
        validate({**complete, "outputs": [{**output, "outputFacets": {"x": unproduced}}]})


def test_a_backfill_stopped_on_request_is_a_valid_abort_event(project: Path) -> None:
    lineage = with_lineage_file(project)
    # at one batch a minute the run waits after its first partition, where it is stopped
    started = tidegate(
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-01-01..2025-01-10",
        "--rate",
        "1/min",
        "--detach",
        "--json",
        "--project",
        project,
    ).json()
    run_id = started["run_id"]

    def first_published() -> bool | None:
        shown = tidegate(
            "show", "partition", "daily_revenue", "2025-01-01", "--json", "--project", project
        )
        published = shown.json()["published"] if shown.exit_code == 0 else None
        return True if published and published["run_id"] == run_id else None

    wait_until("the backfill's first partition is published", first_published, 60)
    asked = tidegate("backfill", "stop", run_id, "--project", project)
    assert asked.exit_code == 0, asked.stderr
    _, status = os.waitpid(started["pid"], 0)
    assert os.waitstatus_to_exitcode(status) == 5
    sent = events(lineage)
    assert [e["eventType"] for e in sent] == ["START", "ABORT"]
    for event in sent:
        validate(event)
    aborted = sent[1]
    assert "stopped" in aborted["run"]["facets"]["errorMessage"]["message"]
    [wrote] = aborted["outputs"]
    assert wrote["facets"]["tidegate_partitions"]["partitions"] == ["2025-01-01"]
