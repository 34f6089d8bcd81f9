"""What a tidegate run reports to Dagster (no Dagster import): the metadata of each partition it
published, and the outcome of each declared check over the run's partitions.

A check is evaluated where an attempt was audited: it failed if any attempt of the model in the
run lists it among its `failed_checks` (a failed error check keeps its batch from publishing; a
failed warn check publishes anyway); it passed if at least one partition of the model was
published and none lists it. A run that published nothing and failed no check evaluated
nothing: no outcome.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidegate.domain.model import CheckSpec, Severity
from tidegate.orchestration import PublishedPartition, published

# Dagster's own key for a row count (its UI shows it as such)
ROW_COUNT = "dagster/row_count"


@dataclass(frozen=True)
class CheckOutcome:
    """A declared check over the partitions of one run."""

    name: str
    passed: bool
    warn: bool  # a warn-severity check: a failure does not block publishing
    partitions: tuple[str, ...]  # the partitions it was evaluated on
    failed_partitions: tuple[str, ...]


def published_partitions(run: Mapping[str, Any], model: str) -> list[PublishedPartition]:
    """What the run (its `show run` document) published of `model`, in partition order."""
    found = [p for p in published(run) if p.model == model]
    return sorted(found, key=lambda p: p.partition)


def metadata(run_id: str, partition: PublishedPartition) -> dict[str, Any]:
    """The materialization metadata of one published partition."""
    found: dict[str, Any] = {
        "tidegate/version": partition.version_id,
        "tidegate/run": run_id,
        "tidegate/attempt": partition.attempt_id,
        "tidegate/checksum": partition.checksum or "",
        "tidegate/failed_checks": list(partition.failed_checks),
    }
    if partition.rows is not None:
        found[ROW_COUNT] = partition.rows
    return found


def check_outcomes(
    run: Mapping[str, Any], model: str, checks: Sequence[CheckSpec]
) -> list[CheckOutcome]:
    """Each declared check of `model` that the run evaluated, with where it failed."""
    attempts = [a for a in run.get("attempts", ()) if a.get("model") == model]
    done = sorted({p.partition for p in published_partitions(run, model)})
    outcomes: list[CheckOutcome] = []
    for check in checks:
        failed = sorted(
            {a["partition"] for a in attempts if check.name in (a.get("failed_checks") or ())}
        )
        if not failed and not done:
            continue
        outcomes.append(
            CheckOutcome(
                name=check.name,
                passed=not failed,
                warn=check.severity is Severity.WARN,
                partitions=tuple(sorted({*done, *failed})),
                failed_partitions=tuple(failed),
            )
        )
    return outcomes
