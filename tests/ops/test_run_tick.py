"""`tidegate run` as a scheduler tick: the partitions due by `--as-of` (by each model's cron
schedule) since the newest one its active version published, in dependency order."""

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
    # idempotent: 03-03 is published already; February's months run now their days are there
    assert ran == {
        "monthly_revenue": [("2025-02", "published")],
        "revenue_report": [("2025-02", "published")],
    }
    code, ran = tick(project)
    assert (code, ran) == (0, {})


def test_the_schedule_decides_when_a_partition_is_due(project: Path) -> None:
    # daily at 02:00 UTC: at 01:59 on 03-05, 03-04 is over but not due yet
    _, ran = tick(project, "2025-03-05T01:59:00Z")
    assert ran["daily_revenue"] == [("2025-03-03", "published")]
    status = tidegate(
        "status", "daily_revenue", "--project", project, "--as-of", "2025-03-05T01:59:00Z", "--json"
    ).json()
    assert status["models"][0]["next_partition"] == {
        "partition": "2025-03-04",
        "through": "2025-03-04",
        "due_at": "2025-03-05T02:00:00+00:00",
        "version": "v1",
        "unpublished": ["2025-01-01..2025-03-02"],
    }
    # missed ticks are caught up from the newest published partition, oldest first
    _, ran = tick(project, "2025-03-08T02:00:00Z")
    assert ran["daily_revenue"] == [
        ("2025-03-04", "published"),
        ("2025-03-05", "published"),
        ("2025-03-06", "published"),
        ("2025-03-07", "published"),
    ]


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
