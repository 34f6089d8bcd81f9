"""Runs, backfills and reruns announce what they published: OpenLineage events to lineage
targets and notices to each registered consumer, through the outbox — nothing lost while a
consumer's endpoint is down."""

from __future__ import annotations

import json
from pathlib import Path

from tests.kit import Hook, tidegate


def register(project: Path, url: str) -> None:
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text() + f'\n[[notify]]\nname = "finance_hook"\nkind = "http"\nurl = "{url}"\n'
        '\n[[notify]]\nname = "lineage_log"\nkind = "file"\npath = "lineage.jsonl"\n'
        "lineage = true\n"
        '\n[[consumers]]\nname = "finance"\nmodel = "daily_revenue"\nnotify = "finance_hook"\n'
    )


def test_a_consumer_down_at_first_gets_every_notice_once_it_is_up(
    project: Path, hook: Hook
) -> None:
    register(project, hook.url)
    ran = tidegate(
        "run",
        "daily_revenue",
        "--partition",
        "2025-01-01..2025-01-02",
        "--json",
        "--project",
        project,
    )
    assert ran.exit_code == 0, ran.stderr
    run_id = ran.json()["run_id"]
    assert any("kept in the outbox" in n for n in ran.json()["notes"])
    assert hook.received == []
    # the lineage file got the run's OpenLineage START event when it began, then its COMPLETE
    # event with the partitions it wrote, both for the same OpenLineage run
    lines = (project / "lineage.jsonl").read_text().splitlines()
    began, event = [json.loads(line) for line in lines]
    assert began["eventType"] == "START" and began["job"]["name"] == "daily_revenue"
    assert event["eventType"] == "COMPLETE" and event["job"]["name"] == "daily_revenue"
    assert began["run"]["runId"] == event["run"]["runId"]
    [output] = event["outputs"]
    assert output["facets"]["tidegate_partitions"]["partitions"] == ["2025-01-01..2025-01-02"]

    hook.up.set()
    # the failed notice waits out its backoff (1 s after the first failure): any time later
    later = ("--as-of", "2099-01-01T00:00:00Z")
    delivered = tidegate("deliver", "--json", *later, "--project", project)
    assert delivered.exit_code == 0, delivered.stderr
    assert delivered.json() == {"schema": "tidegate.deliver/v1", "delivered": 1, "kept": []}
    [notice] = hook.received
    assert (notice["kind"], notice["model"], notice["partitions"], notice["run_id"]) == (
        "published",
        "daily_revenue",
        ["2025-01-01..2025-01-02"],
        run_id,
    )
    # delivered once: a second delivery sends nothing again
    assert tidegate("deliver", "--json", *later, "--project", project).json()["delivered"] == 0
    assert len(hook.received) == 1

    # a backfill tells its partitions as ranges, at once now that the endpoint is up
    backfill = tidegate(
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-01-03..2025-01-09",
        "--batch-size",
        "3",
        "--project",
        project,
    )
    assert backfill.exit_code == 0, backfill.stderr
    assert hook.received[-1]["partitions"] == ["2025-01-03..2025-01-09"]


def test_a_consumer_of_an_unknown_model_is_a_one_line_error(project: Path, hook: Hook) -> None:
    register(project, hook.url)
    config = project / "tidegate.toml"
    config.write_text(config.read_text().replace('model = "daily_revenue"', 'model = "nope"'))
    result = tidegate("status", "--project", project)
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "consumers: finance reads 'nope', which is not a model" in line
