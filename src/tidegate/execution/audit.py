"""Auditing a staged partition: the contract, the partition bounds and the declared checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tidegate.domain.checks import CheckResult, contract_result, judge
from tidegate.domain.model import CheckSpec, Column, ModelSpec, Severity
from tidegate.domain.partitions import Grain
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


def audit(
    engine: Engine, spec: ModelSpec, staging: str, bounds: Mapping[str, Any]
) -> list[CheckResult]:
    """Every check result for a staged partition, the contract first."""
    results = [contract_result(contract_problems(spec.columns, engine.staging_columns(staging)))]
    if not results[0].passed:
        return results
    bounds_check = CheckSpec(
        name="partition_bounds",
        kind="partition_bounds",
        severity=Severity.BLOCKING,
        params={"column": spec.partition_column, "keyed": spec.grain is Grain.KEY},
    )
    for check in (bounds_check, *spec.checks):
        results.append(judge(check, engine.measure(check, staging, bounds)))
    return results
