"""Auditing staged partitions: the contract, the partition bounds and the declared checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tidegate.domain.checks import CheckResult, contract_result, judge
from tidegate.domain.model import CheckSpec, Column, ModelSpec, Severity
from tidegate.domain.partitions import Grain, PartitionKey
from tidegate.engines.base import Engine


def contract_problems(declared: Sequence[Column], staged: Sequence[Column]) -> list[str]:
    """Differences between the declared contract and what the query produced."""
    problems: list[str] = []
    produced = {c.name: c for c in staged}
    for column in declared:
        found = produced.get(column.name)
        if found is None:
            problems.append(f"column {column.name} is missing")
        elif found.type != column.type:
            problems.append(f"column {column.name} is {found.type}, contract says {column.type}")
        elif found.nullable and not column.nullable:
            problems.append(f"column {column.name} holds NULLs but is declared NOT NULL")
    expected = {c.name for c in declared}
    problems.extend(
        f"column {name} is not in the contract" for name in produced if name not in expected
    )
    return problems


def bounds_check(spec: ModelSpec) -> CheckSpec:
    """Every written row must lie in the partitions being written: what makes overwrite safe."""
    return CheckSpec(
        name="partition_bounds",
        kind="partition_bounds",
        severity=Severity.BLOCKING,
        params={"column": spec.partition_column, "keyed": spec.grain is Grain.KEY},
    )


def contract_check(engine: Engine, spec: ModelSpec, staging: str) -> CheckResult:
    return contract_result(contract_problems(spec.columns, engine.staging_columns(staging)))


def judge_all(
    contract: CheckResult,
    checks: Sequence[CheckSpec],
    measured: Mapping[str, Mapping[int | None, int]],
    partitions: Sequence[PartitionKey],
) -> dict[int, list[CheckResult]]:
    """Every check result for each staged partition (keyed by its start), the contract first."""
    results: dict[int, list[CheckResult]] = {p.start: [contract] for p in partitions}
    for check in checks:
        values = measured[check.name]
        if check.kind == "partition_bounds":
            # rows outside the window belong to no partition being written: all of them fail
            stray = sum(values.values())
            values = {p.start: stray for p in partitions}
        for partition in partitions:
            results[partition.start].append(judge(check, values.get(partition.start, 0)))
    return results


def measure_key_partition(
    engine: Engine,
    checks: Sequence[CheckSpec],
    staging: str,
    bounds: Mapping[str, Any],
    partition: PartitionKey,
) -> dict[str, dict[int | None, int]]:
    """A key-list partition is one unit with no time buckets: measure each check on it."""
    return {c.name: {partition.start: engine.measure(c, staging, bounds)} for c in checks}
