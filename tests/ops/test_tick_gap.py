"""What the next scheduler tick writes, and the history it will not: deploy and status agree."""

from __future__ import annotations

from pathlib import Path

from tests.kit import tidegate

BACKFILL = "tidegate backfill daily_revenue --partitions"


def test_deploy_names_the_tick_and_the_gap_before_it(undeployed_project: Path) -> None:
    project = undeployed_project
    assert tidegate("build", "--project", project).exit_code == 0
    as_of = ("--as-of", "2025-03-01T03:00:00Z")
    deployed = tidegate("deploy", "daily_revenue", "--project", project, *as_of)
    assert deployed.exit_code == 0, deployed.stderr
    # a first version's tick writes the newest due day only: the rest is a backfill's
    assert "the next run writes 2025-02-28 with it" in deployed.stdout
    assert f"2025-01-01..2025-02-27 never published: {BACKFILL} 2025-01-01..2025-02-27" in (
        deployed.stdout
    )
    document = tidegate("deploy", "daily_revenue", "--project", project, *as_of, "--json")
    assert document.json()["unpublished"] == ["2025-01-01..2025-02-27"]
    assert document.json()["next_through"] == "2025-02-28"

    status = tidegate("status", "--project", project, *as_of)
    assert "next due 2025-02-28 with v1" in status.stdout
    assert f"2025-01-01..2025-02-27 never published: {BACKFILL} 2025-01-01..2025-02-27" in (
        status.stdout
    )


def test_status_shows_the_catch_up_window_and_what_lies_before_it(project: Path) -> None:
    ran = tidegate(
        "run", "daily_revenue", "--partition", "2025-01-01..2025-01-31", "--project", project
    )
    assert ran.exit_code == 0, ran.stderr
    as_of = ("--as-of", "2025-06-01T03:00:00Z")
    status = tidegate("status", "--project", project, *as_of)
    assert "next due 2025-05-02..2025-05-31 with v1" in status.stdout
    assert f"2025-02-01..2025-05-01 never published: {BACKFILL} 2025-02-01..2025-05-01" in (
        status.stdout
    )
    upcoming = tidegate("status", "daily_revenue", "--project", project, *as_of, "--json")
    assert upcoming.json()["models"][0]["next_partition"] == {
        "partition": "2025-05-02",
        "through": "2025-05-31",
        "due_at": "2025-06-01T03:00:00+00:00",
        "version": "v1",
        "unpublished": ["2025-02-01..2025-05-01"],
    }
