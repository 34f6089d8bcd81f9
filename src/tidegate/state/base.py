"""The StateStore seam: the ledger of versions, deploys, runs, attempts and partitions.

The warehouse holds the truth of what was published (commit markers); the ledger records intent
before and outcome after, and is reconciled from the markers after a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from tidegate.domain.attempt import AttemptState, RunStatus
from tidegate.domain.checks import CheckResult
from tidegate.domain.command import CommandRecord
from tidegate.domain.cursor import CursorMark
from tidegate.domain.gate import Gate
from tidegate.domain.model import Version
from tidegate.domain.queue import BatchTally, Lease, RunTally
from tidegate.domain.reconciliation import ReconciliationResult
from tidegate.domain.run import Attempt, Audit, Input, PublishedPartition, Run
from tidegate.domain.stream import StreamRecord
from tidegate.domain.taint import Mark, MarkKind, Read, Taint, TaintedPartition
from tidegate.notify.row import ConsumerRead, OutboxRow
from tidegate.report.rows import CellRow, FailingCheck, RunSummary


@dataclass(frozen=True)
class ModelState:
    model: str
    active_version: str | None
    previous_version: str | None
    paused: bool
    deployed_at: str | None


@dataclass(frozen=True)
class Event:
    kind: str
    actor: str
    at: str
    model: str | None = None
    version_id: str | None = None
    run_id: str | None = None
    reason: str | None = None
    detail: dict[str, Any] | None = None


@dataclass(frozen=True)
class Told:
    """What a taint records besides its marks, in the same transaction: its history event and
    the notices (target, payload JSON) queued for the consumers of what it reached, and the
    history events of the downstream models it reached."""

    event: Event
    notices: Sequence[tuple[str, str]]
    reached: Sequence[Event] = ()


class StateStore(Protocol):
    """Every method is one transaction; none is partially applied. Raises StateStoreError when
    the store cannot be used (corrupt, or written by a newer tidegate)."""

    # versions
    def save_version(self, version: Version) -> Version:
        """Store a version; idempotent on (model, fingerprint): returns the stored one."""

    def find_version(self, model: str, fingerprint: str) -> Version | None: ...

    def get_version(self, version_id: str) -> Version | None: ...

    def resolve_version(self, model: str, ref: str) -> Version | None:
        """A version of `model` by `vN`, full id or unique id prefix."""

    def active_version(self, model: str) -> Version | None:
        """The version `model` runs now, if one was deployed."""

    def versions(self, model: str) -> list[Version]: ...

    def next_seq(self, model: str) -> int: ...

    # deploys and history
    def model_state(self, model: str) -> ModelState | None: ...

    def model_states(self) -> list[ModelState]: ...

    def activate(self, model: str, version_id: str, at: str, event: Event) -> None:
        """Make `version_id` active (the old one becomes previous) and record the event."""

    def record_event(self, event: Event) -> None: ...

    def set_paused(self, model: str, paused: bool, event: Event) -> None:
        """Pause or unpause `model` (runs and new backfills refuse it) and record the event."""

    def confirming_run(self, model: str) -> str | None:
        """The first run that published a partition of `model` with its active version after
        that version was deployed: the run that confirmed the deploy. Ordered by the ledger,
        not by clocks (a run may be backdated)."""

    # gates
    def record_gate(self, gate: Gate, event: Event) -> None:
        """Record a validation gate and its history event."""

    def gates(self, model: str) -> list[Gate]:
        """Every gate of `model` in the order recorded (the newest last)."""

    def events(self, model: str) -> list[Event]:
        """History events of `model` in the order they were recorded (the ledger's event
        sequence), not by `at`: `--as-of` can stamp an event with any time."""

    # runs and attempts
    def create_run(self, run: Run) -> None: ...

    def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        reason: str | None,
        at: str,
        trigger: str | None = None,
        events: Sequence[Event] = (),
    ) -> None:
        """End the run; `events` (history of what it changed) are written in that
        transaction, so a run is never ended unrecorded."""

    def reopen_run(self, run_id: str, pid: int) -> None:
        """Mark a stopped or failed run running again, for `resume`."""

    def request_stop(self, run_id: str, at: str) -> None:
        """Ask a running run to stop after its in-flight batches. Idempotent."""

    def stop_requested(self, run_id: str) -> bool: ...

    def runs(self, kind: str | None = None, limit: int = 50) -> list[Run]:
        """Newest runs first."""

    def get_run(self, run_id: str) -> Run | None: ...

    def live_runs(self) -> list[Run]: ...

    def last_run(self, model: str) -> Run | None:
        """The newest run that made an attempt at `model`."""

    # distributed runs: batches queued for workers, leases (ledger_queue.py) -----------------
    def create_distributed_run(
        self,
        run: Run,
        max_concurrency: int,
        rate_per_minute: int | None,
        selection: Sequence[tuple[int, int]],
        batches: Iterable[tuple[int, int, int]],
    ) -> None:
        """Record a distributed run and queue its batches (index, start, end) in one
        transaction; raises HeldError when a live distributed run of the model holds one of
        the partitions in `selection` in a batch not yet done."""

    def reopen_distributed_run(
        self, run_id: str, pid: int, selection: Sequence[tuple[int, int]], at: str
    ) -> None:
        """Queue again the batches of a distributed run that are not done or left partitions
        failed or skipped, and mark it running, resumed `at` (for `resume`); raises HeldError
        like create_distributed_run."""

    def run_resumed(self, run_id: str) -> tuple[str, BatchTally] | None:
        """When a distributed run was last resumed, and what its batches had done then."""

    def claim_batch(self, worker: str, lease_ms: int) -> Lease | None:
        """Lease the next batch a worker may start within its run's throttle (concurrency and
        rate over every worker), raising the batch's fencing token; None when none may."""

    def renew_lease(self, lease: Lease, lease_ms: int) -> bool:
        """Extend a live lease from the ledger's now; False when it expired or is no longer
        the batch's."""

    def settle_batch(self, lease: Lease, tally: BatchTally, halt: str | None = None) -> bool:
        """Mark a batch done with what it did (and the stop-loss it fired, `halt`) while its
        lease lives; False when the lease expired or its token is stale."""

    def batch_outcome(self, run_id: str, batch: int) -> dict[str, tuple[int, int]]:
        """Per state, the batch's partitions whose newest attempt in the run is in it, and
        their rows."""

    def release_batch(self, lease: Lease) -> bool:
        """Give a leased batch back to the queue untouched."""

    def run_halt(self, run_id: str) -> str | None: ...

    def run_tally(self, run_id: str) -> RunTally:
        """A distributed run's batches summed, and how many are queued or in flight."""

    def close_distributed_run(
        self, run_id: str, status: str, reason: str | None, at: str, trigger: str | None
    ) -> bool:
        """End a live distributed run when no batch is in flight; True for the one caller
        that ended it."""

    def live_attempts_of_batch(self, run_id: str, batch: int) -> list[Attempt]:
        """Attempts of a batch that a previous lease holder left unfinished."""

    def batch_claims(self, run_id: str) -> list[tuple[int, int, str, int]]:
        """(batch, token, worker, claimed at in the ledger's epoch ms) of every claim."""

    def create_attempt(self, attempt: Attempt) -> None:
        """Record the intent to write a partition (state pending)."""

    def create_attempts(self, attempts: Sequence[Attempt], batch: int | None = None) -> None:
        """Record the intent to write several partitions, in one transaction."""

    def move_attempt(
        self,
        attempt_id: str,
        state: AttemptState,
        at: str,
        rows: int | None = None,
        checksum: str | None = None,
        error: str | None = None,
    ) -> None:
        """Move an attempt along its state machine; publishing goes through `publish`."""

    def move_attempts(
        self,
        moves: Sequence[tuple[str, int | None, str | None, str | None]],
        state: AttemptState,
        at: str,
    ) -> None:
        """Move attempts (attempt_id, rows, checksum, error) to `state` in one transaction.

        Raises IllegalTransition, changing nothing, if one is not in a state that may move there.
        """

    def record_audits(self, audits: Sequence[Audit], at: str) -> None:
        """Record what auditing found and move the staged attempts to audited."""

    def reconciliations(self, attempt_id: str) -> list[ReconciliationResult]: ...

    def publish(self, attempt_id: str, at: str) -> None:
        """Mark an audited attempt published and make it its partition's published attempt.

        Taints follow in the same transaction: the marks of the attempt it replaces are cleared
        (by this attempt), and it is marked with the open taints of the upstream partitions it
        read."""

    def publish_many(self, attempt_ids: Sequence[str], at: str) -> None:
        """`publish` for several attempts in one transaction."""

    def record_published_content(self, contents: Mapping[str, tuple[int, str]]) -> None:
        """For audited attempts whose publish left their partition holding other rows than
        they staged (merge, append): attempt id → the partition's rows and checksum after the
        publish, as its commit marker carries them. They replace the staged ones recorded by
        `record_audits`, so that `publish` gives the partition its content. One transaction;
        idempotent; raises IllegalTransition, changing nothing, if an attempt is not audited."""

    def record_checks(self, attempt_id: str, results: Sequence[CheckResult]) -> None: ...

    def record_reconciliations(
        self, attempt_id: str, results: Sequence[ReconciliationResult]
    ) -> None:
        """Record reconciliation results of an attempt in any state (an update's, measured in
        its publish's transaction). Idempotent: a result of the same name is replaced."""

    def record_command(self, attempt_ids: Sequence[str], record: CommandRecord) -> None:
        """Record (or update) the job a command model ran for these attempts."""

    def command(self, attempt_id: str) -> CommandRecord | None:
        """The job a command model ran for an attempt, if it ran one."""

    def unfinished_commands(self) -> dict[str, CommandRecord]:
        """attempt id → its job, for jobs recorded as started and never as ended."""

    def end_commands(self, attempt_ids: Sequence[str], at: str) -> None:
        """Record these attempts' jobs as ended (without an exit code: stopped by tidegate)."""

    def record_inputs(self, attempt_id: str, inputs: Sequence[Input]) -> None: ...

    def record_inputs_many(self, inputs: Mapping[str, Sequence[Input]]) -> None: ...

    def last_published_attempt(self, model: str) -> str | None:
        """The newest (by id) attempt of `model` that published, if any: its commit marker is
        the last the warehouse must hold of the model."""

    def get_attempt(self, attempt_id: str) -> Attempt | None: ...

    def live_attempts(self) -> list[Attempt]:
        """Attempts not in a terminal state: after a crash, those left pending."""

    def attempts_of_run(self, run_id: str) -> list[Attempt]: ...

    def ended_attempts(self, run_id: str, since: str | None) -> list[Attempt]:
        """Attempts of a run that ended at or after `since` (None: every one that ended), in
        the order they ended."""

    def checks(self, attempt_id: str) -> list[CheckResult]: ...

    def checks_of_run(self, run_id: str) -> dict[str, list[CheckResult]]:
        """The check results of every attempt of a run, by attempt id, in one read."""

    def inputs(self, attempt_id: str) -> list[Input]: ...

    # cursor marks
    def record_cursor_mark(self, mark: CursorMark) -> None:
        """Record what a run of a cursor model saw and how far it went. Transactional."""

    def cursor_marks(
        self, model: str, table: str, column: str, limit: int = 20
    ) -> list[CursorMark]:
        """The newest marks of `model` measured in `table`.`column`, newest first."""

    def run_cursor_marks(self, run_id: str) -> list[CursorMark]: ...

    def newest_published(self, model: str) -> list[tuple[str, int, int]]:
        """Per version of `model` that published partitions: (version id, the furthest end it
        published, the ledger sequence of its last published attempt), last published first
        (by that sequence, never by a timestamp)."""

    # stream jobs
    def save_stream(self, record: StreamRecord, event: Event | None = None) -> None:
        """Write a stream model's row and, when given, the history event of the change, in one
        transaction."""

    def stream(self, model: str) -> StreamRecord | None: ...

    def streams(self) -> list[StreamRecord]: ...

    # partitions (the read model)
    def partition(self, model: str, start: int) -> PublishedPartition | None: ...

    def partitions(self, model: str, start: int, end: int) -> list[PublishedPartition]:
        """Partitions of `model` whose start lies in [start, end), in order."""

    def published_intervals(
        self, model: str, start: int, end: int, version_id: str | None = None
    ) -> list[tuple[int, int]]:
        """Published partitions of `model` in [start, end) merged into intervals (only those
        written by `version_id` when given). Merged in the store, not one row per partition."""

    def newest_published_end(self, model: str, end: int, version_id: str) -> int | None:
        """Where the newest partition of `model` published by `version_id` and starting
        before `end` ends (None: there is none), found without reading the whole history."""

    def run_checkpoints(self, run_id: str, model: str) -> list[tuple[int, int]]:
        """The partitions of `model` a run has published (its checkpoints), merged into
        intervals."""

    def segments(
        self, model: str, active_version: str | None, limit: int = 1000
    ) -> tuple[dict[str, int], list[tuple[str, str | None, int, int, int]]]:
        """Counts by state (as `partition_counts`) and the first `limit` runs of consecutive
        partitions with the same state and writer: (state, version, count, start, end)."""

    def mean_publish_seconds(self, model: str) -> float | None:
        """Recorded throughput: seconds per published partition over recent batches."""

    def partition_counts(self, model: str, active_version: str | None) -> dict[str, int]:
        """Counts by state: published (by the active version), stale, failed, running."""

    def close(self) -> None: ...

    # outbox ----------------------------------------------------------------------------
    # Events waiting for delivery to notification targets (tidegate.notify.outbox).
    # Timestamps are ledger stamps (ISO-8601 UTC, microseconds), compared as text.
    def add_outbox(
        self,
        entries: Sequence[tuple[str, str]],
        at: str,
        reads: Mapping[int, Sequence[ConsumerRead]] | None = None,
    ) -> list[int]:
        """Queue (target, payload JSON) rows, due at once, in one transaction; their ids in
        order. `reads` (by entry index) are the consumer reads an entry tells of: they count as
        consumed once it is delivered."""

    def claim_outbox(self, target: str, now: str, until: str) -> OutboxRow | None:
        """The oldest undelivered row of `target` if it is due at `now`, counted as one more
        attempt and not due again before `until` (so a concurrent delivery skips it); None when
        the target has nothing due. A later row never goes before an earlier one."""

    def mark_outbox_delivered(self, row_id: int, at: str) -> None:
        """Record the row delivered; a row already delivered keeps its first time."""

    def mark_outbox_failed(self, row_id: int, error: str, next_attempt_at: str) -> None:
        """Record why the attempt failed and when to try again; the row stays queued."""

    def outbox(self, target: str | None = None, pending_only: bool = False) -> list[OutboxRow]:
        """Outbox rows (of `target`, or undelivered only), oldest first."""

    # taints and consumers ----------------------------------------------------------------
    def taint(
        self,
        taint: Taint,
        order: Sequence[str],
        parents: Mapping[str, Sequence[str]],
        tell: Callable[[Sequence[Mark]], Told] | None = None,
    ) -> list[Mark]:
        """Record `taint` and mark the partitions it reaches (domain.taint.propagate over the
        models downstream of its model, `order` and `parents` as there), reading lineage and
        writing marks in one transaction, so no publish slips between; what `tell` makes of the
        marks (the history event, the notices for the outbox) is written in that transaction
        too, so a taint is never recorded untold. Records nothing and returns [] when no
        partition in its range is published."""

    def open_taints(
        self, model: str | None = None, start: int | None = None, end: int | None = None
    ) -> list[TaintedPartition]:
        """Open marks (of `model`, overlapping [start, end)), by model and partition."""

    def mark(
        self,
        taint: Taint,
        marks: Sequence[Mark],
        tell: Callable[[Sequence[Mark]], Told] | None = None,
    ) -> None:
        """Record `taint` and exactly `marks` (no propagation: a finding of one partition, such
        as a `diverged` or `missing` one), with what `tell` makes of them, in one
        transaction."""

    def marks_of_run(self, run_id: str, kind: MarkKind) -> list[TaintedPartition]:
        """The open marks of `kind` that `run_id` made (its publishes left them stale, or its
        checks found them diverged), shallowest first."""

    def tainted_counts(self) -> dict[str, dict[MarkKind, int]]:
        """Per model and kind of mark: how many partitions carry an open mark."""

    def cleared_by_run(self, run_id: str) -> list[tuple[str, int, int]]:
        """Partitions (model, start, end) whose marks attempts of `run_id` cleared and which
        carry no open mark now: the ones to re-read."""

    def readers(self, model: str, upstream: str, windows: Sequence[tuple[int, int]]) -> list[Read]:
        """Published partitions of `model` whose attempt read `upstream` in one of `windows`."""

    def record_reads(
        self, consumer: str, model: str, windows: Sequence[tuple[int, int]], at: str
    ) -> None:
        """A consumer acknowledged reading these windows of `model`."""

    def consumed(self, model: str, start: int, end: int) -> dict[int, list[str]]:
        """Per published partition of `model` starting in [start, end): the consumers that read
        what is published there now (acknowledged, or told by a delivered notice)."""

    # the report and the UI (read only) -----------------------------------------------------
    def reading(self) -> AbstractContextManager[None]:
        """Hold one read transaction: every read inside sees the same committed ledger, while
        writers in other processes go on. Reads only; not reentrant."""

    def ledger_stamp(self) -> str:
        """A token that changes whenever the ledger changes (any process), to skip rereading
        an unchanged ledger. Cheap; opaque."""

    def partition_cells(self, model: str, active_version: str | None) -> list[CellRow]:
        """Every partition of `model` the ledger knows, in order, in the state `segments`
        counts it under, with the run and checksum of what is published and the newest
        attempt's run, version and error when that attempt is not the published one."""

    def run_summaries(self, limit: int = 200) -> list[RunSummary]:
        """The newest `limit` runs, newest first, each with its attempts counted by state."""

    def failing_checks(self, limit: int = 200) -> list[FailingCheck]:
        """Check results that did not pass, newest attempt first."""

    def current_check_failures(self, model: str) -> list[FailingCheck]:
        """Failed check results of the newest attempt of each partition of `model`, in
        partition order."""

    def recent_events(self, limit: int = 500) -> list[Event]:
        """History events of every model, newest first."""

    def recent_outbox(self, limit: int = 200) -> list[OutboxRow]:
        """Outbox rows, newest first (delivered or not)."""
