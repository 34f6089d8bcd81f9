"""The event stream of --events / --events-file: apart from stdout's one document, created at
the first event (a refused command writes nothing), appended to by later runs."""

from __future__ import annotations

import json
from pathlib import Path

from tests.kit import example_project, tidegate

RANGE = ("--partitions", "2025-01-01..2025-01-02")


def test_a_refused_command_writes_no_event_file(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    events = tmp_path / "events.jsonl"
    refused = tidegate("backfill", "nosuch", *RANGE, "--events-file", events, "--project", project)
    assert refused.exit_code == 2 and "unknown model" in refused.stderr
    assert not events.exists()
    missing = tidegate(
        "backfill", "daily_revenue", *RANGE, "--events-file", tmp_path / "no" / "e.jsonl",
        "--project", project,
    )  # fmt: skip
    assert missing.exit_code == 2
    assert missing.stderr.strip().splitlines() == [
        f"error: --events-file {tmp_path / 'no' / 'e.jsonl'}: its folder {tmp_path / 'no'} "
        "does not exist"
    ]


def test_events_are_appended_run_after_run_apart_from_the_result(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    events = tmp_path / "events.jsonl"
    for _ in range(2):
        done = tidegate(
            "backfill", "daily_revenue", *RANGE, "--json", "--events-file", events,
            "--project", project,
        )  # fmt: skip
        assert done.exit_code == 0, done.stderr
        assert json.loads(done.stdout)["schema"] == "tidegate.backfill-result/v1"
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    kinds = [line["event"] for line in lines]
    assert kinds == ["start", "partition", "partition", "end"] * 2
    assert len({line["run_id"] for line in lines}) == 2


def test_events_jsonl_goes_to_stderr(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    done = tidegate(
        "backfill", "daily_revenue", *RANGE, "--json", "--events", "jsonl", "--project", project
    )
    assert done.exit_code == 0, done.stderr
    kinds = [json.loads(line)["event"] for line in done.stderr.splitlines()]
    assert kinds == ["start", "partition", "partition", "end"]
    assert json.loads(done.stdout)["status"] == "succeeded"
