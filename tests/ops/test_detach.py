"""`backfill --detach`: the run goes on in a background process of its own; the command prints
its run id once the run is recorded and returns, and `show run` follows it. What the background
process refuses before its run exists is the command's own error and exit code."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.kit import continued_until_exit, example_project, tidegate, until_stopped
from tests.ops.test_json_schemas import validator
from tidegate.crash import ENVIRONMENT_VARIABLE, SIGNAL_VARIABLE

RANGE = ("--partitions", "2025-01-01..2025-01-10")


def detached(project: Path, *args: str) -> dict[str, Any]:
    result = tidegate(
        "backfill", "daily_revenue", *args, "--detach", "--json", "--project", project
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    document: dict[str, Any] = json.loads(result.stdout)
    validator("backfill-detached").validate(document)
    return document


def exit_code_of(pid: int) -> int:
    """The background process is this test process's child: wait for it to end."""
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def shown_run(project: Path, run_id: str) -> dict[str, Any]:
    result = tidegate("show", "run", run_id, "--json", "--project", project)
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_a_detached_backfill_returns_its_run_id_and_runs_to_the_end(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    started = detached(project, *RANGE)
    assert exit_code_of(started["pid"]) == 0
    run = shown_run(project, started["run_id"])
    assert run["status"] == "succeeded"
    assert sum(1 for p in run["attempts"] if p["state"] == "published") == 10
    log = Path(started["log"])
    assert log.name == f"{started['run_id']}.log"
    assert f"{started['run_id']}: succeeded" in log.read_text()


def test_a_detached_backfill_stops_on_request(tmp_path: Path) -> None:
    """At one batch a minute the run waits after its first partition: `backfill stop` ends
    the background process (exit 5, resumable) long before that minute is over."""
    project = example_project(tmp_path / "p")
    started = detached(project, *RANGE, "--rate", "1/min")
    asked = tidegate("backfill", "stop", started["run_id"], "--project", project)
    assert asked.exit_code == 0, asked.stderr
    assert exit_code_of(started["pid"]) == 5
    run = shown_run(project, started["run_id"])
    assert run["status"] == "stopped" and run["stop_requested_at"] is not None
    assert "stopped on request; resumable" in Path(started["log"]).read_text()


def test_what_the_background_process_refuses_is_the_commands_error(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    unknown = tidegate("backfill", "nosuch", *RANGE, "--detach", "--json", "--project", project)
    assert unknown.exit_code == 2
    [document] = [json.loads(unknown.stdout)]
    assert document["schema"] == "tidegate.error/v1"
    assert "unknown model 'nosuch'" in document["error"]
    paused = tidegate("pause", "daily_revenue", "--project", project)
    assert paused.exit_code == 0, paused.stderr
    refused = tidegate("backfill", "daily_revenue", *RANGE, "--detach", "--project", project)
    assert refused.exit_code == 3, refused.stderr
    assert refused.stderr.count("\n") == 1 and "paused" in refused.stderr
    # nothing is left behind: no run, no log
    listed = tidegate("backfill", "list", "--json", "--project", project)
    assert json.loads(listed.stdout)["runs"] == []
    assert list((project / ".tidegate" / "detached").iterdir()) == []


def test_a_second_writer_detached_meanwhile_is_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = example_project(tmp_path / "p")
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "after_stage")
    monkeypatch.setenv(SIGNAL_VARIABLE, "SIGSTOP")
    first = detached(project, *RANGE)
    monkeypatch.delenv(ENVIRONMENT_VARIABLE)
    until_stopped(first["pid"])
    try:
        second = tidegate("backfill", "daily_revenue", *RANGE, "--detach", "--project", project)
        assert second.exit_code == 4, second.stderr
        assert "in use by another tidegate process" in second.stderr
    finally:
        assert continued_until_exit(first["pid"]) == 0
    runs = json.loads(tidegate("backfill", "list", "--json", "--project", project).stdout)["runs"]
    assert [r["run_id"] for r in runs] == [first["run_id"]]


def test_detach_with_a_dry_run_is_a_usage_error(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    result = tidegate(
        "backfill", "daily_revenue", *RANGE, "--dry-run", "--detach", "--project", project
    )
    assert result.exit_code == 2
    assert not (project / ".tidegate" / "detached").exists()
