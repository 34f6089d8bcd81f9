"""Running an update model's batch: no staging; the worker measures what its key ranges hold,
and the publish is the UPDATE, its audit and the commit markers in one warehouse transaction
(engines/sql_update.py). A lock or statement timeout rolls the transaction back and is tried
again a bounded number of times, with a growing pause; each timed-out try is recorded with the
attempt, and the last one fails it (counted by the stop-loss like any failed partition).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tidegate.domain.checks import CheckResult
from tidegate.domain.checksum import Checksum
from tidegate.domain.clock import Timer
from tidegate.domain.errors import ContentionError, EngineError, UsageError
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
    """A batch transaction's bounds (seconds; None: the model's, else the warehouse's)."""

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
class Published:
    """An update that committed: what each range holds, by its start."""

    content: dict[int, Checksum]


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
    """What stops an update model from running on this warehouse: a missing table or column.
    Read-only."""
    _, update = updater(engine, spec)
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
    return problems


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


def publish_update(
    engine: Engine,
    state: StateStore,
    timer: Timer,
    spec: ModelSpec,
    markers: Sequence[CommitMarker],
    limits: Limits,
    before_try: Callable[[], None],
) -> Published | Refused:
    """Update, audit and mark the ranges of `markers` in one transaction, trying again after
    a lock or statement timeout; record each range's audit with its attempt."""
    warehouse, update = updater(engine, spec)
    timeouts = limits.for_model(update)
    by_start = {m.partition_start: m.attempt_id for m in markers}
    tries = limits.retries + 1
    for attempt in range(1, tries + 1):
        before_try()
        try:
            audits = warehouse.update_ranges(
                update, spec.partition_column, spec.checks, markers, _refusal(spec), timeouts
            )
        except UpdateRefused as refused:
            _record(state, spec, by_start, refused.audits)
            failed_checks = any(_blocking(spec, a) for a in refused.audits)
            return Refused(str(refused), failed_checks, not failed_checks)
        except ContentionError as error:
            pause = FIRST_BACKOFF_SECONDS * 2 ** (attempt - 1)
            last = attempt == tries
            note = CheckResult(
                f"contention_{attempt}",
                "contention",
                Severity.WARN,
                False,
                str(error),
                f"try {attempt} of {tries}: {error}; "
                + ("gave up" if last else f"trying again in {pause:g}s"),
            )
            for attempt_id in by_start.values():
                state.record_checks(attempt_id, [note])
            if last:
                return Refused(f"{error} ({tries} tries; nothing was written)")
            timer.sleep(pause)
            continue
        _record(state, spec, by_start, audits)
        return Published({a.start: a.checksum for a in audits})
    raise AssertionError("unreachable: the last try returns")


def _refusal(spec: ModelSpec) -> Callable[[Sequence[RangeAudit]], str | None]:
    def refusal(audits: Sequence[RangeAudit]) -> str | None:
        for audit in audits:
            reasons = [
                f"reconciliation {column}: {differing:,} of {audit.rows:,} rows still differ "
                "from the expression"
                for (column, _), differing in zip(
                    spec.update.assignments if spec.update else (), audit.differing, strict=True
                )
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
    state: StateStore, spec: ModelSpec, by_start: dict[int, str], audits: Sequence[RangeAudit]
) -> None:
    """Each range's reconciliation (rows equal to their expression, out of the range's rows)
    and check results, with its attempt."""
    assignments = spec.update.assignments if spec.update else ()
    for audit in audits:
        attempt_id = by_start[audit.start]
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
