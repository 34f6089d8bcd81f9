"""Calling tidegate as an orchestrator does: a process of its own per command, its exit code and
its one result document, and what the run published (read back with `show run`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import example_project, tidegate
from tidegate import orchestration
from tidegate.orchestration import (
    Invocation,
    OrchestrationError,
    Outcome,
    invoke,
    published,
    run_document,
)


def test_a_backfill_outcome_and_what_it_published(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    outcome = invoke(Invocation("backfill", "daily_revenue", "2025-01-01..2025-01-03", project))
    assert outcome.succeeded, outcome.reason
    assert outcome.document["schema"] == "tidegate.backfill-result/v1"
    assert outcome.run_id is not None and outcome.reason == ""
    done = published(run_document(outcome.run_id, project))
    assert sorted(p.partition for p in done) == ["2025-01-01", "2025-01-02", "2025-01-03"]
    assert all(p.model == "daily_revenue" and p.checksum and p.rows for p in done)


def test_a_refusal_keeps_its_exit_code_and_reason(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p")
    assert tidegate("pause", "daily_revenue", "--project", project).exit_code == 0
    outcome = invoke(Invocation("backfill", "daily_revenue", "2025-01-01..2025-01-02", project))
    assert outcome.exit_code == orchestration.REFUSED
    assert "paused" in outcome.reason


def test_a_usage_error_is_a_document_too(tmp_path: Path) -> None:
    project = example_project(tmp_path / "p", deploy=False)
    outcome = invoke(Invocation("backfill", "no_such_model", "2025-01-01..2025-01-02", project))
    assert outcome.exit_code == orchestration.USAGE
    assert outcome.document["schema"] == "tidegate.error/v1"
    assert "no_such_model" in outcome.reason


def test_a_command_without_a_document_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(OrchestrationError, match="without a result document"):
        orchestration.call(["--version"])


def test_invocations_are_checked_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="one of"):
        Invocation("drop", "m", "2025-01-01")
    with pytest.raises(ValueError, match="needs partitions"):
        Invocation("backfill", "m")
    assert Invocation("run", "m").arguments() == ["run", "m", "--project", ".", "--json"]
    assert Invocation("recover", "m", options=("--batch-size", "7")).arguments()[:4] == [
        "recover",
        "m",
        "--batch-size",
        "7",
    ]


def test_only_failures_and_busy_models_are_worth_a_retry() -> None:
    def retryable(code: int) -> bool:
        return Outcome(code).retryable

    assert retryable(orchestration.FAILED) and retryable(orchestration.BUSY)
    refused = (orchestration.USAGE, orchestration.REFUSED, orchestration.STOPPED)
    assert not any(retryable(code) for code in refused)
    assert not retryable(orchestration.SUCCEEDED)  # nothing to retry
