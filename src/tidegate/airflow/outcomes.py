"""What an exit code means to an orchestrator, and what a task hands on: the mapping the operator
applies, kept free of Airflow so that it is tested on its own."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

from tidegate import orchestration
from tidegate.orchestration import PublishedPartition


class Verdict(str, Enum):
    SUCCEEDED = "succeeded"  # the task succeeds
    RETRY = "retry"  # the task fails; Airflow retries it (its `retries`)
    FAIL = "fail"  # the task fails without retry: retrying repeats the mistake or the refusal
    BUSY = "busy"  # another writer holds the model: try again after a delay
    SKIP = "skip"  # stopped on request: the task is skipped, with the reason


VERDICTS = {
    orchestration.SUCCEEDED: Verdict.SUCCEEDED,
    orchestration.FAILED: Verdict.RETRY,
    orchestration.USAGE: Verdict.FAIL,
    orchestration.REFUSED: Verdict.FAIL,
    orchestration.BUSY: Verdict.BUSY,
    orchestration.STOPPED: Verdict.SKIP,
}

# a detached run's final status (`show run`'s `status`), as the exit code the command would have
# had: an interrupted run (its process died) is a failure worth retrying
STATUS_EXIT_CODES = {
    "succeeded": orchestration.SUCCEEDED,
    "failed": orchestration.FAILED,
    "interrupted": orchestration.FAILED,
    "stopped": orchestration.STOPPED,
}

# the XCom keys a task pushes (its return value is the summary, all of them together)
XCOM_RUN_ID = "run_id"
XCOM_PUBLISHED = "published"
XCOM_VERSIONS = "versions"
XCOM_CHECKSUMS = "checksums"


def verdict(exit_code: int) -> Verdict:
    """What Airflow makes of an exit code; an unknown one is a failure worth retrying."""
    return VERDICTS.get(exit_code, Verdict.RETRY)


def exit_code_of_status(status: str) -> int:
    """The exit code a detached run's final status stands for."""
    return STATUS_EXIT_CODES.get(status, orchestration.FAILED)


def summary(
    command: str, model: str, outcome: orchestration.Outcome, done: Iterable[PublishedPartition]
) -> dict[str, Any]:
    """The task's XCom values: the run id, what it published (each partition's version, rows and
    checksum), the versions it published and the checksum of each partition, by model."""
    partitions = sorted(done, key=lambda p: (p.model, p.partition))
    checksums: dict[str, dict[str, str | None]] = {}
    for p in partitions:
        checksums.setdefault(p.model, {})[p.partition] = p.checksum
    return {
        "command": command,
        "model": model,
        "exit_code": outcome.exit_code,
        XCOM_RUN_ID: outcome.run_id,
        XCOM_PUBLISHED: [
            {
                "model": p.model,
                "partition": p.partition,
                "version_id": p.version_id,
                "rows": p.rows,
                "checksum": p.checksum,
            }
            for p in partitions
        ],
        XCOM_VERSIONS: sorted({p.version_id for p in partitions}),
        XCOM_CHECKSUMS: checksums,
    }


def partitions_of(model: str, values: Mapping[str, Any]) -> list[str]:
    """The partitions of `model` a summary says were published, in order."""
    return [p["partition"] for p in values[XCOM_PUBLISHED] if p["model"] == model]
