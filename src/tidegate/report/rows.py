"""Rows the ledger gives the report, shared by the StateStore seam and the view model (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tidegate.domain.run import Run


class CellRow(NamedTuple):
    """One known partition of a model as the report draws it.

    `state` is the one `status` counts it under (published, stale, failed, running, skipped,
    pending); `version_id`, `run_id` and `checksum` describe what is published there, if
    anything; `last_*` the newest attempt when that is not the published one (a failure, a
    skip, an attempt in flight)."""

    start: int
    end: int
    state: str
    version_id: str | None
    run_id: str | None
    checksum: str | None
    last_run_id: str | None
    last_version_id: str | None
    error: str | None


class FailingCheck(NamedTuple):
    """A check result that did not pass, with the attempt it judged; `resolved_*`: the run
    that later published the same partition with this check passing, and when."""

    model: str
    grain: str
    start: int
    end: int
    run_id: str
    attempt_id: str
    version_id: str
    name: str
    kind: str
    severity: str
    message: str
    at: str | None
    resolved_by: str | None = None
    resolved_at: str | None = None


@dataclass(frozen=True)
class RunSummary:
    """A run and what its attempts came to: counts by attempt state, rows published, and when
    its first attempt started and its last one ended."""

    run: Run
    states: dict[str, int]
    rows: int
    first_attempt_at: str | None
    last_attempt_at: str | None
