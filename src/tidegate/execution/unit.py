"""Computing and auditing one unit (consecutive partitions whose inputs are complete).

Runs on a worker thread with its own engine handle; the worker then publishes on the run's
engine, one worker at a time (executor.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tidegate.crash import crash_point
from tidegate.domain.checks import QUERY_KINDS, CheckResult
from tidegate.domain.checksum import Checksum
from tidegate.domain.cursor import cursor_bounds
from tidegate.domain.errors import EngineError, ModelError
from tidegate.domain.model import Column, ModelSpec, Reconciliation, Version
from tidegate.domain.partitions import PartitionKey, PartitionRange
from tidegate.domain.reconciliation import ReconciliationResult, Sides, compare
from tidegate.engines.base import Engine, PartitionProfile, bound_values, window_bounds
from tidegate.execution.audit import (
    builtin_checks,
    contract_check,
    contract_null_checks,
    contract_with_nulls,
    judge_all,
    measure_key_partition,
    measure_queries,
)
from tidegate.execution.inputs import ReadPlan, previous_start
from tidegate.sql.model_sql import missing_column
from tidegate.sql.sandbox import stored_refusal


@dataclass(frozen=True)
class ReadFrom:
    """Where a reconciliation reads its input side: a published table and its time column."""

    table: str
    time_column: str


@dataclass(frozen=True)
class Unit:
    window: PartitionRange
    partitions: tuple[PartitionKey, ...]
    attempts: dict[int, str]  # partition start → attempt id
    batch: int
    # partition start → reconciliation name → the source side's value, read with the inputs
    source_values: dict[int, dict[str, str | None]] = field(default_factory=dict)
    # partition start → relative row_count name → the rows it compares with, read with the
    # inputs (ReadPlan.baselines)
    baselines: dict[int, dict[str, int | None]] = field(default_factory=dict)
    # partition start → input → its rows in the window; and the inputs allowed to be empty
    input_rows: dict[int, dict[str, int]] = field(default_factory=dict)
    empty_ok: frozenset[str] = frozenset()

    @staticmethod
    def reading(
        plan: ReadPlan,
        window: PartitionRange,
        partitions: Sequence[PartitionKey],
        attempts: Mapping[int, str],
        batch: int,
    ) -> Unit:
        """A unit of `partitions`, with what the batch's read of its inputs found for them."""
        return Unit(
            window,
            tuple(partitions),
            {p.start: attempts[p.start] for p in partitions},
            batch,
            {p.start: plan.source_values.get(p.start, {}) for p in partitions},
            {p.start: plan.baselines.get(p.start, {}) for p in partitions},
            {p.start: plan.input_rows.get(p.start, {}) for p in partitions},
            plan.empty_ok,
        )

    def sides(self, rule: Reconciliation, start: int, target_rows: int) -> Sides:
        """What a reconciliation of partition `start` compares besides values."""
        return Sides(
            self.input_rows.get(start, {}).get(rule.source, 0),
            target_rows,
            rule.source in self.empty_ok,
        )

    def bounds(self, spec: ModelSpec) -> dict[str, object]:
        if spec.cursor is not None:
            return cursor_bounds(spec.cursor.kind, self.window.start, self.window.end)
        if spec.keys:
            return bound_values(self.partitions[0], self.partitions[0].label(spec.keys))
        return window_bounds(self.window.start, self.window.end)


class Stager(Protocol):
    """Computes a unit's rows into a fresh staging table: the model's SELECT in the warehouse,
    or its program (see execution/programs.py). Raises EngineError or ModelError when it
    cannot; leaves no staging table then."""

    def stage(
        self,
        engine: Engine,
        version: Version,
        unit: Unit,
        staging: str,
        inputs: Mapping[str, ReadFrom],
    ) -> None: ...

    def interrupt(self) -> None:
        """Stop the programs running for units now (a second Ctrl-C)."""


class QueryStager:
    """Stages SQL models only: the warehouse runs the SELECT."""

    def stage(
        self,
        engine: Engine,
        version: Version,
        unit: Unit,
        staging: str,
        inputs: Mapping[str, ReadFrom],
    ) -> None:
        if version.spec.program is not None:
            raise ModelError(
                f"{version.model} is a {version.spec.kind.value} model, which runs only in a "
                "project's writer session"
            )
        refused = stored_refusal(version.sql)
        if refused is not None:
            raise ModelError(f"{version.model} {version.label}: {refused}")
        engine.stage(staging, version.sql, unit.bounds(version.spec))

    def interrupt(self) -> None:
        """An SQL statement is interrupted through its engine handle."""


@dataclass(frozen=True)
class Computed:
    unit: Unit
    staging: str
    checks: dict[int, list[CheckResult]] = field(default_factory=dict)
    checksums: dict[int, Checksum] = field(default_factory=dict)
    reconciliations: dict[int, list[ReconciliationResult]] = field(default_factory=dict)
    error: str | None = None

    def problems(self, start: int) -> list[str]:
        """Why partition `start` must not be published (empty when it may)."""
        found = [
            f"check {r.name} failed: {r.message}" for r in self.checks.get(start, []) if r.blocks
        ]
        found += [
            f"reconciliation {r.message}"
            for r in self.reconciliations.get(start, [])
            if not r.passed
        ]
        return found


def compute(
    engine: Engine,
    version: Version,
    unit: Unit,
    read_from: Mapping[str, ReadFrom],
    on_staged: Callable[[Unit], None],
    staging: str,
    stager: Stager,
) -> Computed:
    """Stage the unit's rows into `staging`, audit, checksum and reconcile them. Never
    publishes."""
    spec = version.spec
    bounds = unit.bounds(spec)
    try:
        engine.drop_staging(staging)  # left by a unit that failed to drop it
        stager.stage(engine, version, unit, staging, read_from)
        on_staged(unit)
        crash_point("after_stage")
        if spec.single_unit:
            contract = contract_check(engine, spec, staging)
            if not contract.passed:
                return _refused(unit, staging, contract)
            return _compute_key(engine, spec, staging, bounds, unit, read_from, contract)
        # the types now; the NULLs of NOT NULL columns are counted in the staging pass
        types = engine.staging_columns(staging, count_nulls=False)
        contract = contract_with_nulls(spec, types, {})
        if not contract.passed:
            return _refused(unit, staging, contract)
        return _compute_window(engine, spec, staging, bounds, unit, read_from, types)
    except (EngineError, ModelError) as error:
        engine.drop_staging(staging)
        return Computed(unit, staging, error=explained(version, str(error), read_from))


def _compute_key(
    engine: Engine,
    spec: ModelSpec,
    staging: str,
    bounds: Mapping[str, object],
    unit: Unit,
    read_from: Mapping[str, ReadFrom],
    contract: CheckResult,
) -> Computed:
    partition = unit.partitions[0]
    checks = (*builtin_checks(spec), *spec.checks)
    measured: dict[str, Mapping[int | None, int | None]] = {
        **measure_key_partition(engine, checks, staging, bounds, partition),
        **measure_queries(engine, spec, checks, staging, _tables(read_from)),
    }
    checksum = engine.checksum(staging, [c.name for c in spec.columns])
    rows = {partition.start: checksum.rows}
    return Computed(
        unit,
        staging,
        judge_all(contract, checks, measured, unit.partitions, rows, unit.baselines),
        {partition.start: checksum},
        _reconcile_unit(engine, spec, staging, unit, checksum.rows),
    )


def _reconcile_unit(
    engine: Engine, spec: ModelSpec, staging: str, unit: Unit, rows: int
) -> dict[int, list[ReconciliationResult]]:
    """A partition computed alone (a cursor interval): each rule's source side, read with the
    inputs, against its target side over the staged rows."""
    if not spec.reconciliations:
        return {}
    [partition] = unit.partitions
    targets = engine.staged_aggregates(staging, [r.target_expression for r in spec.reconciliations])
    sources = unit.source_values.get(partition.start, {})
    return {
        partition.start: [
            compare(rule, sources.get(rule.name), target, unit.sides(rule, partition.start, rows))
            for rule, target in zip(spec.reconciliations, targets, strict=True)
        ]
    }


def _compute_window(
    engine: Engine,
    spec: ModelSpec,
    staging: str,
    bounds: Mapping[str, object],
    unit: Unit,
    read_from: Mapping[str, ReadFrom],
    types: Sequence[Column],
) -> Computed:
    """One pass over the staged batch: checksums, the contract's NULL counts, every check but
    the query checks (their own statement each) and reconciliation targets, per partition."""
    grain = spec.grain.value
    checks = (*builtin_checks(spec), *spec.checks)
    nulls = contract_null_checks(spec)
    profiled = [*nulls, *(c for c in checks if c.kind not in QUERY_KINDS)]
    profiles = engine.profile(
        staging,
        True,
        spec.partition_column,
        grain,
        bounds,
        [c.name for c in spec.columns],
        profiled,
        [r.target_expression for r in spec.reconciliations],
    )
    measured: dict[str, Mapping[int | None, int | None]] = {
        check.name: {b: p.measured[i] for b, p in profiles.items()}
        for i, check in enumerate(profiled)
    }
    counted = {
        c.params["columns"][0]: sum(v or 0 for v in measured.pop(c.name).values()) for c in nulls
    }
    contract = contract_with_nulls(spec, types, counted)
    if not contract.passed:
        return _refused(unit, staging, contract)
    measured.update(measure_queries(engine, spec, checks, staging, _tables(read_from)))
    empty = PartitionProfile(Checksum(0, 0))
    produced = {p.start: profiles.get(p.start, empty) for p in unit.partitions}
    rows = {start: found.checksum.rows for start, found in produced.items()}
    return Computed(
        unit,
        staging,
        judge_all(contract, checks, measured, unit.partitions, rows, _baselines(spec, unit, rows)),
        {start: found.checksum for start, found in produced.items()},
        _reconcile(engine, spec, unit, produced, read_from),
    )


def _refused(unit: Unit, staging: str, contract: CheckResult) -> Computed:
    """A unit whose staged rows break the contract: nothing else is judged."""
    return Computed(unit, staging, checks={p.start: [contract] for p in unit.partitions})


def explained(version: Version, error: str, read_from: Mapping[str, ReadFrom]) -> str:
    """An engine's error, led by the model and version whose query it refused when it is a
    column a table the query reads lacks (the engine's own words name neither)."""
    kinds = {n: "source" if n in version.spec.sources else "model" for n in read_from}
    tables = {origin.table: f"{kinds[n]} {n}" for n, origin in read_from.items()}
    missing = missing_column(version.sql, error, tables)
    if missing is None:
        return error
    return f"{version.model} v{version.seq}: {missing} ({error.splitlines()[0]})"


def _tables(read_from: Mapping[str, ReadFrom]) -> dict[str, str]:
    """The physical table of each source and upstream model: what a query check's SELECT
    reads under their names."""
    return {name: origin.table for name, origin in read_from.items()}


def _baselines(
    spec: ModelSpec, unit: Unit, rows: Mapping[int, int]
) -> dict[int, dict[str, int | None]]:
    """What each relative row_count compares with: the baselines read with the inputs, except
    that a previous partition staged in this unit counts with its staged rows. It is published
    together with the partition or not at all, so those are the rows the ledger will hold; the
    ledger still has the rows of before this run."""
    found = {start: dict(values) for start, values in unit.baselines.items()}
    for check in spec.checks:
        if check.kind != "row_count" or check.params.get("relative_to") != "previous":
            continue
        for partition in unit.partitions:
            previous = previous_start(spec, partition.start)
            if previous in rows:
                found.setdefault(partition.start, {})[check.name] = rows[previous]
    return found


def _reconcile(
    engine: Engine,
    spec: ModelSpec,
    unit: Unit,
    produced: Mapping[int, PartitionProfile],
    read_from: Mapping[str, ReadFrom],
) -> dict[int, list[ReconciliationResult]]:
    """Compare each rule's source side (read with the inputs, or from an upstream model here)
    with the target side measured in the staging pass."""
    source_values = {start: dict(values) for start, values in unit.source_values.items()}
    from_models = [r for r in spec.reconciliations if r.source not in spec.sources]
    for name in {r.source for r in from_models}:
        rules = [r for r in from_models if r.source == name]
        origin = read_from[name]
        measured = engine.aggregates_by_partition(
            origin.table,
            False,
            origin.time_column,
            spec.grain.value,
            [r.source_expression for r in rules],
            window_bounds(unit.window.start, unit.window.end),
        )
        for partition in unit.partitions:
            values = measured.get(partition.start, [None] * len(rules))
            for rule, value in zip(rules, values, strict=True):
                source_values.setdefault(partition.start, {})[rule.name] = value
    return {
        p.start: [
            compare(
                rule,
                source_values.get(p.start, {}).get(rule.name),
                _value(produced[p.start], index),
                unit.sides(rule, p.start, produced[p.start].checksum.rows),
            )
            for index, rule in enumerate(spec.reconciliations)
        ]
        for p in unit.partitions
    }


def _value(profile: PartitionProfile, index: int) -> str | None:
    return profile.values[index] if index < len(profile.values) else None
