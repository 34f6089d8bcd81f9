"""OpenLineage run events and consumer notices: the shape consumers rely on.

The openlineage-python package ships no JSON schema, so the required fields of the 2-0-2 spec
(https://openlineage.io/spec/2-0-2/OpenLineage.json, RunEvent) are asserted here.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tidegate.notify.events import (
    PARTITIONS_FACET,
    PARTITIONS_FACET_SCHEMA,
    PRODUCER,
    DatasetRef,
    LineageState,
    NoticeKind,
    notice,
    run_event,
    run_uuid,
)

AT = datetime(2025, 1, 2, 3, 4, 5, 600_000, tzinfo=timezone.utc)
WAREHOUSE = "duckdb://warehouse.duckdb"


def event(state: LineageState = "COMPLETE", **overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "namespace": "tidegate://orders",
        "model": "daily_revenue",
        "run_id": "run-20250102T030405Z-ab12",
        "at": AT,
        "inputs": [DatasetRef(WAREHOUSE, "main.orders")],
        "outputs": [
            DatasetRef(WAREHOUSE, "main.daily_revenue", ("2025-01-01", "2025-01-02"), "v2")
        ],
    }
    arguments.update(overrides)
    document = run_event(state, **arguments)
    # what goes in the outbox must survive JSON unchanged
    assert json.loads(json.dumps(document)) == document
    return document


@pytest.mark.parametrize("state", ["START", "COMPLETE", "FAIL", "ABORT"])
def test_a_run_event_has_every_field_the_spec_requires(state: LineageState) -> None:
    document = event(state)
    assert document["eventType"] == state
    assert document["eventTime"] == "2025-01-02T03:04:05.600000+00:00"
    assert document["producer"] == PRODUCER
    assert (
        document["schemaURL"]
        == "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
    )
    assert document["job"]["namespace"] == "tidegate://orders"
    assert document["job"]["name"] == "daily_revenue"
    run_id = uuid.UUID(document["run"]["runId"])
    assert run_id.version == 5
    assert [(d["namespace"], d["name"]) for d in document["inputs"]] == [(WAREHOUSE, "main.orders")]
    assert [(d["namespace"], d["name"]) for d in document["outputs"]] == [
        (WAREHOUSE, "main.daily_revenue")
    ]


def test_the_partitions_facet_names_the_partitions_and_the_version() -> None:
    output = event()["outputs"][0]
    assert output["facets"] == {
        PARTITIONS_FACET: {
            "_producer": PRODUCER,
            "_schemaURL": PARTITIONS_FACET_SCHEMA,
            "partitions": ["2025-01-01", "2025-01-02"],
            "version": "v2",
        }
    }
    # a dataset without partitions carries no partitions facet
    assert event()["inputs"][0]["facets"] == {}
    read = event(inputs=[DatasetRef(WAREHOUSE, "main.orders_clean", ("2025-01-01",))])
    assert read["inputs"][0]["facets"][PARTITIONS_FACET]["partitions"] == ["2025-01-01"]
    assert "version" not in read["inputs"][0]["facets"][PARTITIONS_FACET]


def test_the_run_id_is_derived_from_the_tidegate_run_and_the_model() -> None:
    assert event("START")["run"]["runId"] == event("COMPLETE")["run"]["runId"]
    assert event()["run"]["runId"] == run_uuid("run-20250102T030405Z-ab12", "daily_revenue")
    assert run_uuid("run-a", "daily_revenue") != run_uuid("run-b", "daily_revenue")
    assert run_uuid("run-a", "daily_revenue") != run_uuid("run-a", "monthly_revenue")


def test_a_failure_carries_its_error_message() -> None:
    failed = event("FAIL", error="check net_not_above_gross failed on 2025-01-02")
    facet = failed["run"]["facets"]["errorMessage"]
    assert facet["message"] == "check net_not_above_gross failed on 2025-01-02"
    assert facet["programmingLanguage"] == "SQL"
    assert facet["_producer"] == PRODUCER
    assert event()["run"].get("facets", {}) == {}


def test_event_times_are_utc_and_must_be_timezone_aware() -> None:
    elsewhere = AT.astimezone(timezone(timedelta(hours=9)))
    assert event(at=elsewhere)["eventTime"] == "2025-01-02T03:04:05.600000+00:00"
    with pytest.raises(ValueError, match="timezone-aware"):
        event(at=AT.replace(tzinfo=None))
    with pytest.raises(ValueError, match="timezone-aware"):
        notice(
            "published", model="m", partitions=[], reason=None, run_id=None, at=datetime(2025, 1, 1)
        )


@pytest.mark.parametrize("kind", ["taint", "reread", "published"])
def test_a_notice_tells_a_consumer_what_happened_to_which_partitions(kind: NoticeKind) -> None:
    document = notice(
        kind,
        model="revenue_report",
        partitions=("2025-01", "2025-02"),
        reason="late refunds",
        run_id="run-20250102T030405Z-ab12",
        at=AT,
    )
    assert document == {
        "schema": "tidegate.notice/v1",
        "kind": kind,
        "model": "revenue_report",
        "partitions": ["2025-01", "2025-02"],
        "reason": "late refunds",
        "run_id": "run-20250102T030405Z-ab12",
        "at": "2025-01-02T03:04:05.600000+00:00",
    }
