"""Running an update model's batch: no staging; the worker measures what its key ranges hold,
and the publish is, range by range, the UPDATE, its audit and the range's commit marker in one
warehouse transaction (engines/sql_update.py): a batch of N ranges is N transactions. A lock or
statement timeout (or a deadlock, or a serialization failure) rolls the transaction back and is
tried again a bounded number of times, with a growing pause; each such try is recorded with the
attempt, and the last one fails it (counted by the stop-loss like any failed partition).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tidegate.crash import crash_point
from tidegate.domain.checks import CheckResult
from tidegate.domain.checksum import Checksum
from tidegate.domain.clock import Timer
from tidegate.domain.errors import ContentionError, EngineError, FencedError, UsageError
from tidegate.domain.model import ModelSpec, Severity, UpdateSpec
from tidegate.domain.reconciliation import ReconciliationResult
from tidegate.engines.base import CommitMarker, Engine
from tidegate.engines.sql_update import RangeAudit, RangeUpdates, UpdateRefused
from tidegate.execution.unit import Computed, Unit
from tidegate.sql.updates import is_integer_type
from tidegate.state.base import StateStore

# a timed-out transaction is tried again this many times, after 0.5 s, 1 s, 2 s
RETRIES = 3
FIRST_BACKOFF_SECONDS = 0.5


@dataclass(frozen=True)
class Limits:
    """A range transaction's bounds (seconds; None: the model's, else the warehouse's)."""

    lock_timeout: float | None = None
    statement_timeout: float | None = None
    retries: int = RETRIES

    def for_model(self, update: UpdateSpec) -> tuple[float | None, float | None]:
        return (
            self.lock_timeout if self.lock_timeout is not None else update.lock_timeout,
            (
                self.statement_timeout
                if self.statement_timeout is not None
                else update.statement_timeout
            ),
        )


@dataclass(frozen=True)
class Refused:
    """An update that wrote nothing, and why."""

    reason: str
    check_failure: bool = False
    mismatch: bool = False


def updater(engine: Engine, spec: ModelSpec) -> tuple[RangeUpdates, UpdateSpec]:
    """The engine as one that updates in place, or UsageError for one that cannot."""
    if spec.update is None:
        raise ValueError(f"{spec.name} is not an update model")
    if not isinstance(engine, RangeUpdates):
        raise UsageError(
            f"{spec.name}: write mode update needs an SQL warehouse (DuckDB or PostgreSQL); "
            f"{engine.name} has none"
        )
    return engine, spec.update


def table_problems(engine: Engine, spec: ModelSpec) -> list[str]:
    """What stops an update model from running on this warehouse: a missing table or column,
    a key that is not an integer, rows whose key is NULL (in no key range), an expression or
    check that does not bind to the table's columns or cannot be stored in its column.
    Read-only."""
    warehouse, update = updater(engine, spec)
    found = engine.table_columns(update.table)
    if found is None:
        return [f"table {update.table} does not exist"]
    have = {c.name: c.type for c in found}
    wanted = [spec.partition_column, *(c for c, _ in update.assignments)]
    problems = [f"table {update.table} has no column {c}" for c in wanted if c not in have]
    key_type = have.get(spec.partition_column)
    if key_type is not None and not is_integer_type(key_type):
        problems.append(
            f"key column {spec.partition_column} is {key_type}, not an integer: key ranges "
            "need an integer key"
        )
    key = next((c for c in found if c.name == spec.partition_column), None)
    if not problems and key is not None and key.nullable:
        nulls = warehouse.null_keys(update.table, key.name)
        if nulls:
            rows = "row" if nulls == 1 else "rows"
            problems.append(
                f"key column {key.name} is NULL in {nulls:,} {rows} of {update.table}: no key "
                "range holds them and the backfill would leave them unset; give them a key "
                "first (a NOT NULL key column keeps it so)"
            )
    if not problems:
        bound = warehouse.bind_problem(update, spec.partition_column, spec.checks, have)
        if bound is not None:
            problems.append(f"[set] or checks cannot run on table {update.table}: {bound}")
    return problems


def rows_outside_ranges(engine: Engine, spec: ModelSpec) -> str | None:
    """Why a backfill whose ranges all published did not update every row of the table: rows
    whose key is NULL are in no key range (None: there are none, or the key column cannot be
    NULL). Read-only; the backfill checks it at its end, since the application may have
    written such rows after it started."""
    warehouse, update = updater(engine, spec)
    found = engine.table_columns(update.table) or []
    key = next((c for c in found if c.name == spec.partition_column), None)
    if key is None or not key.nullable:
        return None
    try:
        nulls = warehouse.null_keys(update.table, key.name)
    except EngineError as error:
        return f"rows with a NULL {key.name} could not be counted: {error}"
    if not nulls:
        return None
    rows = "row" if nulls == 1 else "rows"
    return (
        f"key column {key.name} is NULL in {nulls:,} {rows} of {update.table}: no key range "
        "holds them, so they were not updated; give them a key and backfill their chunks"
    )


def measure(engine: Engine, spec: ModelSpec, unit: Unit) -> Computed:
    """On the worker, read-only: each range's rows now (what its attempt records when
    audited); the update itself and its audit come with the publish."""
    warehouse, update = updater(engine, spec)
    try:
        counts = warehouse.rows_per_chunk(
            update.table,
            spec.partition_column,
            spec.chunk_size,
            (unit.window.start, unit.window.end),
        )
    except EngineError as error:
        return Computed(unit, "", error=str(error))
    return Computed(
        unit,
        "",
        checks={p.start: [] for p in unit.partitions},
        checksums={p.start: Checksum(counts.get(p.start, 0), 0) for p in unit.partitions},
    )


@dataclass(frozen=True)
class Published:
    """What a batch of ranges wrote, range by range: what each published range holds (by its
    start), and why the first range that was not published was refused (None: all were)."""

    content: dict[int, Checksum]
    refused: Refused | None = None
    refused_start: int | None = None


def publish_update(
    engine: Engine,
    state: StateStore,
    timer: Timer,
    spec: ModelSpec,
    markers: Sequence[CommitMarker],
    limits: Limits,
    lease_held: Callable[[], bool],
) -> Published:
    """Update, audit and mark the ranges of `markers` one by one, each in a warehouse
    transaction of its own recorded in the ledger once it commits: a batch of N ranges is N
    transactions, and no range's row locks are held while another is updated. The first range
    refused (its audit, or its tries exhausted) stops the batch; the ranges before it stay
    published. Each range's audit is recorded with its attempt either way."""
    content: dict[int, Checksum] = {}
    for marker in markers:
        outcome = _publish_range(engine, state, timer, spec, marker, limits, lease_held)
        if isinstance(outcome, Refused):
            return Published(content, outcome, marker.partition_start)
        content[marker.partition_start] = outcome
    return Published(content)


def _publish_range(
    engine: Engine,
    state: StateStore,
    timer: Timer,
    spec: ModelSpec,
    marker: CommitMarker,
    limits: Limits,
    lease_held: Callable[[], bool],
) -> Checksum | Refused:
    """One range's transaction, tried again after a lock or statement timeout, a deadlock or
    a serialization failure, then its publish in the ledger: what it holds, or why nothing
    was written."""
    warehouse, update = updater(engine, spec)
    timeouts = limits.for_model(update)
    attempts = {marker.partition_start: marker.attempt_id}
    tries = limits.retries + 1
    number = 0
    while True:
        number += 1
        if not lease_held():
            raise FencedError(
                "fenced: this worker's lease expired or was taken over; nothing was published"
            )
        crash_point("before_publish")
        try:
            audit = warehouse.update_range(
                update,
                spec.partition_column,
                spec.checks,
                marker,
                _refusal(spec, update),
                timeouts,
            )
        except UpdateRefused as refused:
            _record(state, spec, update, attempts, refused.audits)
            failed_checks = any(_blocking(spec, a) for a in refused.audits)
            return Refused(str(refused), failed_checks, not failed_checks)
        except ContentionError as error:
            if number == tries:
                _note_try(state, attempts, number, tries, f"{error}; gave up")
                return Refused(f"{error} ({tries} tries; nothing was written)")
            pause = FIRST_BACKOFF_SECONDS * 2 ** (number - 1)
            _note_try(state, attempts, number, tries, f"{error}; trying again in {pause:g}s")
            timer.sleep(pause)
            continue
        crash_point("after_publish")
        _record(state, spec, update, attempts, [audit])
        checksum = audit.checksum
        state.record_published_content({marker.attempt_id: (checksum.rows, str(checksum))})
        state.publish_many([marker.attempt_id], marker.published_at)
        crash_point("after_ledger")
        return checksum


def _note_try(
    state: StateStore, attempts: Mapping[int, str], number: int, tries: int, what: str
) -> None:
    """A try that timed out, recorded with each attempt of the batch."""
    note = CheckResult(
        f"contention_{number}",
        "contention",
        Severity.WARN,
        False,
        what.split(";")[0],
        f"try {number} of {tries}: {what}",
    )
    for attempt_id in attempts.values():
        state.record_checks(attempt_id, [note])


def _refusal(spec: ModelSpec, update: UpdateSpec) -> Callable[[RangeAudit], str | None]:
    """Why a range's audit refuses its commit (None: it allows it)."""

    def refusal(audit: RangeAudit) -> str | None:
        reasons = [
            f"reconciliation {column}: {differing:,} of {audit.rows:,} rows still differ "
            "from the expression"
            for (column, _), differing in zip(update.assignments, audit.differing, strict=True)
            if differing
        ]
        reasons += [
            f"check {check.name} failed: {violations:,} of {audit.rows:,} rows"
            for check, violations in zip(spec.checks, audit.violations, strict=True)
            if violations and check.severity is Severity.BLOCKING
        ]
        if reasons:
            return f"range {audit.start}: " + "; ".join(reasons) + "; nothing was written"
        return None

    return refusal


def _blocking(spec: ModelSpec, audit: RangeAudit) -> bool:
    return any(
        v and c.severity is Severity.BLOCKING
        for c, v in zip(spec.checks, audit.violations, strict=True)
    )


def _record(
    state: StateStore,
    spec: ModelSpec,
    update: UpdateSpec,
    attempts: Mapping[int, str],
    audits: Sequence[RangeAudit],
) -> None:
    """Each range's reconciliation (rows equal to their expression, out of the range's rows)
    and check results, with its attempt."""
    assignments = update.assignments
    for audit in audits:
        attempt_id = attempts[audit.start]
        state.record_reconciliations(
            attempt_id,
            [
                ReconciliationResult(
                    column, str(audit.rows), str(audit.rows - differing), "0", differing == 0
                )
                for (column, _), differing in zip(assignments, audit.differing, strict=True)
            ],
        )
        state.record_checks(
            attempt_id,
            [
                CheckResult(
                    check.name,
                    check.kind,
                    check.severity,
                    violations == 0,
                    str(violations),
                    f"{violations:,} of {audit.rows:,} rows violate it"
                    if violations
                    else f"all {audit.rows:,} rows pass",
                )
                for check, violations in zip(spec.checks, audit.violations, strict=True)
            ]
            + [
                CheckResult(
                    "updated",
                    "update",
                    Severity.WARN,
                    True,
                    str(audit.updated),
                    f"{audit.updated:,} of {audit.rows:,} rows updated; the others held the "
                    "expression's value already",
                )
            ],
        )
