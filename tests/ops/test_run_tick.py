"""`tidegate run` as a scheduler tick: the newest complete partition of each model, in
dependency order, by the active versions, as of `--as-of`."""

from __future__ import annotations

from pathlib import Path

from tests.kit import tidegate

AS_OF = "2025-03-04T05:00:00Z"


def tick(project: Path, as_of: str = AS_OF) -> tuple[int, dict[str, list[tuple[str, str]]]]:
    result = tidegate("run", "--project", project, "--as-of", as_of, "--json")
    document = result.json()
    by_model: dict[str, list[tuple[str, str]]] = {}
    for partition in document["partitions"]:
        by_model.setdefault(partition["model"], []).append(
            (partition["partition"], partition["state"])
        )
    return result.exit_code, by_model


def test_a_tick_runs_the_newest_complete_partition_of_each_model(project: Path) -> None:
    code, ran = tick(project)
    # 2025-03-04 has not ended at 05:00: the newest complete day is 03-03, month February
    assert ran["daily_revenue"] == [("2025-03-03", "published")]
    assert ran["monthly_revenue"] == [("2025-02", "skipped")]  # its days are not there yet
    assert ran["revenue_report"] == [("2025-02", "skipped")]
    assert code == 1

    backfill = tidegate(
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-02-01..2025-02-28",
        "--batch-size",
        "7",
        "--project",
        project,
    )
    assert backfill.exit_code == 0, backfill.stderr
    code, ran = tick(project)
    assert code == 0
    assert ran == {
        "daily_revenue": [("2025-03-03", "published")],
        "monthly_revenue": [("2025-02", "published")],
        "revenue_report": [("2025-02", "published")],
    }


def test_a_tick_before_a_model_starts_runs_nothing_for_it(project: Path) -> None:
    result = tidegate("run", "--project", project, "--as-of", "2024-06-01T00:00:00Z", "--json")
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert document["partitions"] == []
    assert sorted(document["notes"]) == [
        "daily_revenue: no partition due yet",
        "monthly_revenue: no partition due yet",
        "revenue_report: no partition due yet",
    ]
