"""Runs, attempts, their inputs and published partitions, as recorded in the ledger."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tidegate.domain.attempt import AttemptState, RunStatus
from tidegate.domain.checks import CheckResult
from tidegate.domain.reconciliation import ReconciliationResult


@dataclass(frozen=True)
class Run:
    run_id: str
    kind: str
    models: tuple[str, ...]
    partitions: str
    requester: str
    status: RunStatus
    started_at: str
    params: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None
    reason: str | None = None
    ended_at: str | None = None
    plan: str | None = None
    plan_hash: str | None = None
    trigger: str | None = None
    stop_requested_at: str | None = None
    # batches queued in the ledger for `tidegate worker` processes (docs/design.md §7)
    distributed: bool = False


@dataclass(frozen=True)
class Attempt:
    attempt_id: str
    run_id: str
    model: str
    grain: str
    partition_start: int
    partition_end: int
    version_id: str
    state: AttemptState
    started_at: str
    ended_at: str | None = None
    rows: int | None = None
    checksum: str | None = None
    error: str | None = None
    batch: int | None = None


@dataclass(frozen=True)
class Audit:
    """What auditing a staged partition found, recorded in one step."""

    attempt_id: str
    rows: int
    checksum: str
    checks: tuple[CheckResult, ...]
    reconciliations: tuple[ReconciliationResult, ...]


@dataclass(frozen=True)
class Input:
    """What an attempt read: an upstream model's partitions, or a source's rows in a window."""

    upstream: str
    kind: str  # "model" or "source"
    range_start: int
    range_end: int
    fingerprint: str | None = None
    upstream_attempts: tuple[str, ...] = ()


@dataclass(frozen=True)
class PublishedPartition:
    model: str
    grain: str
    partition_start: int
    partition_end: int
    version_id: str | None
    run_id: str | None
    attempt_id: str | None
    rows: int | None
    checksum: str | None
    published_at: str | None
    last_attempt_id: str
    last_state: AttemptState
    last_error: str | None
