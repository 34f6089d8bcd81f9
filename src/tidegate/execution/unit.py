"""Computing and auditing one unit (consecutive partitions whose inputs are complete).

Runs on a worker thread with its own engine handle; publishing happens on the coordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tidegate.domain.checks import CheckResult
from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError
from tidegate.domain.model import ModelSpec, Reconciliation, Version
from tidegate.domain.partitions import PartitionKey, PartitionRange
from tidegate.domain.reconciliation import ReconciliationResult, compare
from tidegate.engines.base import Engine, bound_values, window_bounds
from tidegate.execution.audit import audit
from tidegate.execution.crash import crash_point


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

    def bounds(self, spec: ModelSpec) -> dict[str, object]:
        if spec.keys:
            return bound_values(self.partitions[0], self.partitions[0].label(spec.keys))
        return window_bounds(self.window.start, self.window.end)


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
) -> Computed:
    """Stage the unit's rows, audit them and reconcile them. Never publishes."""
    spec = version.spec
    bounds = unit.bounds(spec)
    staging = f"{spec.name}__{unit.attempts[unit.partitions[0].start]}"
    try:
        engine.stage(staging, version.sql, bounds)
        on_staged(unit)
        crash_point("after_stage")
        checks = audit(engine, spec, staging, bounds, unit.partitions)
        if not all(r.passed for r in checks[unit.partitions[0].start] if r.kind == "contract"):
            return Computed(unit, staging, checks=checks)
        checksums = _checksums(engine, spec, staging, unit)
        reconciled = _reconcile(engine, spec, staging, unit, read_from)
    except EngineError as error:
        engine.drop_staging(staging)
        return Computed(unit, staging, error=str(error))
    return Computed(unit, staging, checks, checksums, reconciled)


def _checksums(engine: Engine, spec: ModelSpec, staging: str, unit: Unit) -> dict[int, Checksum]:
    columns = [c.name for c in spec.columns]
    if spec.keys:
        return {unit.partitions[0].start: engine.checksum(staging, columns)}
    found = engine.partition_checksums(staging, columns, spec.partition_column, spec.grain.value)
    return {p.start: found.get(p.start, Checksum(0, 0)) for p in unit.partitions}


def _reconcile(
    engine: Engine,
    spec: ModelSpec,
    staging: str,
    unit: Unit,
    read_from: Mapping[str, ReadFrom],
) -> dict[int, list[ReconciliationResult]]:
    results: dict[int, list[ReconciliationResult]] = {p.start: [] for p in unit.partitions}
    if not spec.reconciliations:
        return results
    bounds = window_bounds(unit.window.start, unit.window.end)
    grain = spec.grain.value
    target = engine.aggregates_by_partition(
        staging,
        True,
        spec.partition_column,
        grain,
        [r.target_expression for r in spec.reconciliations],
        bounds,
    )
    by_source: dict[str, list[tuple[int, Reconciliation]]] = {}
    for index, rule in enumerate(spec.reconciliations):
        by_source.setdefault(rule.source, []).append((index, rule))
    source_values: dict[int, dict[int, str | None]] = {}
    for name, rules in by_source.items():
        origin = read_from[name]
        measured = engine.aggregates_by_partition(
            origin.table,
            False,
            origin.time_column,
            grain,
            [rule.source_expression for _, rule in rules],
            bounds,
        )
        for position, (index, _) in enumerate(rules):
            source_values[index] = {b: values[position] for b, values in measured.items()}
    for partition in unit.partitions:
        produced = target.get(partition.start)
        for index, rule in enumerate(spec.reconciliations):
            results[partition.start].append(
                compare(
                    rule,
                    source_values[index].get(partition.start),
                    None if produced is None else produced[index],
                )
            )
    return results
