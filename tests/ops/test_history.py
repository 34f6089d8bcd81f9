"""`history`: versions as people name them, events in the order the ledger recorded them, and
the recoveries and taint reach that changed a model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.kit import tidegate
from tests.ops.test_json_schemas import validator
from tests.ops.test_lifecycle import MAX_SQL, WITH_MAX, edit
from tests.ops.test_taint import WEEK, published


def cli(project: Path, *args: str, code: int = 0) -> Any:
    result = tidegate(*args, "--project", project)
    assert result.exit_code == code, (args, result.stdout[-1500:], result.stderr)
    return result


def events(project: Path, model: str) -> list[dict[str, Any]]:
    document = cli(project, "history", model, "--json").json()
    validator("history").validate(document)
    found: list[dict[str, Any]] = document["events"]
    return found


def test_human_history_names_each_version_vn_with_its_id(project: Path) -> None:
    [deploy] = [e for e in events(project, "daily_revenue") if e["kind"] == "deploy"]
    shown = cli(project, "history", "daily_revenue")
    assert f"v1 ({deploy['version_id']})" in shown.stdout


def test_a_backdated_event_is_listed_where_it_was_recorded_not_by_its_time(
    project: Path,
) -> None:
    cli(project, "backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-03")
    edit(project, WITH_MAX, MAX_SQL)
    cli(project, "build")
    cli(project, "deploy", "daily_revenue", "--force", "--reason", "new column")
    # the run is stamped in January 2025, long before the build and deploy it follows
    cli(project, "run", "daily_revenue", "--as-of", "2025-01-05T03:00:00Z")
    kinds = [e["kind"] for e in events(project, "daily_revenue")]
    assert kinds[-3:] == ["build", "deploy", "correctness"], kinds
    assert events(project, "daily_revenue")[-1]["at"].startswith("2025-01-05")


def test_a_recovery_is_recorded_on_each_model_it_recomputed(project: Path) -> None:
    published(project)
    cli(project, "taint", "daily_revenue", "--partitions", WEEK, "--reason", "dup load")
    run_id = cli(project, "recover", "daily_revenue", "--json").json()["run_id"]
    reached = {
        "daily_revenue": [WEEK],
        "monthly_revenue": ["2025-06..2025-07"],
        "revenue_report": ["2025-06..2025-07"],
    }
    for model, partitions in reached.items():
        [recovered] = [e for e in events(project, model) if e["kind"] == "recover"]
        assert recovered["run_id"] == run_id
        assert recovered["detail"] == {
            "origin": "daily_revenue",
            "partitions": partitions,
            "status": "succeeded",
        }


def test_a_taint_is_recorded_on_each_downstream_model_it_reached(project: Path) -> None:
    published(project)
    marked = cli(
        project, "taint", "daily_revenue", "--partitions", WEEK, "--reason", "dup load", "--json"
    ).json()
    for model in ("monthly_revenue", "revenue_report"):
        [reached] = [e for e in events(project, model) if e["kind"] == "tainted_downstream"]
        assert reached["reason"] == "dup load"
        assert reached["detail"] == {
            "taint_id": marked["taint_id"],
            "origin": "daily_revenue",
            "origin_partitions": [WEEK],
            "partitions": ["2025-06..2025-07"],
        }
    # the model it was declared on has its own `taint` event, once
    kinds = [e["kind"] for e in events(project, "daily_revenue")]
    assert kinds.count("taint") == 1 and "tainted_downstream" not in kinds
