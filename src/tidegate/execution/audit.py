"""Auditing staged partitions: the contract, the partition bounds and the declared checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tidegate.domain.checks import QUERY_KINDS, CheckResult, contract_result, judge
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
        params={
            "column": spec.partition_column,
            "keyed": spec.grain is Grain.KEY,
            **({"cursor": True} if spec.cursor is not None else {}),
        },
    )


# Not a plain identifier: no declared check (named, or named after its kind and columns) can
# take it, so its result never overwrites one of theirs in the ledger.
KEY_CHECK = "unique key"


def builtin_checks(spec: ModelSpec) -> tuple[CheckSpec, ...]:
    """The checks every write of `spec` runs besides its declared ones: the partition bounds,
    and for a write matched by the unique key (merge, append with a key) that the staged rows
    hold each key once per partition — two staged rows with one key would make the result
    depend on their order. It is the `unique` check, measured in the same pass; a blocking
    declared `unique` check on some of the key's columns already implies it."""
    # a whole-table model's rows all lie in its one partition: it has no bounds to stray from
    found = [] if spec.grain is Grain.TABLE else [bounds_check(spec)]
    if spec.keyed_write and not any(
        c.kind == "unique"
        and c.severity is Severity.BLOCKING
        and set(c.params["columns"]) <= set(spec.unique_key)
        for c in spec.checks
    ):
        found.append(
            CheckSpec(
                name=KEY_CHECK,
                kind="unique",
                severity=Severity.BLOCKING,
                params={"columns": list(spec.unique_key)},
            )
        )
    return tuple(found)


def contract_check(engine: Engine, spec: ModelSpec, staging: str) -> CheckResult:
    return contract_result(contract_problems(spec.columns, engine.staging_columns(staging)))


# Not a plain identifier either: the NULLs of a NOT NULL column, measured for the contract in the
# staging pass with the checks.
CONTRACT_NULLS = "contract nulls "


def contract_null_checks(spec: ModelSpec) -> tuple[CheckSpec, ...]:
    """A count of NULLs for each column the contract declares NOT NULL."""
    return tuple(
        CheckSpec(CONTRACT_NULLS + c.name, "not_null", Severity.BLOCKING, {"columns": [c.name]})
        for c in spec.columns
        if not c.nullable
    )


def contract_with_nulls(
    spec: ModelSpec, types: Sequence[Column], nulls: Mapping[str, int]
) -> CheckResult:
    """The contract judged on the staged columns' types and the NULLs counted in the staging
    pass (by column name; a column without a count holds none)."""
    staged = [Column(c.name, c.type, nulls.get(c.name, 0) > 0) for c in types]
    return contract_result(contract_problems(spec.columns, staged))


def judge_all(
    contract: CheckResult,
    checks: Sequence[CheckSpec],
    measured: Mapping[str, Mapping[int | None, int | None]],
    partitions: Sequence[PartitionKey],
    rows: Mapping[int, int],
    baselines: Mapping[int, Mapping[str, int | None]],
) -> dict[int, list[CheckResult]]:
    """Every check result for each staged partition (keyed by its start), the contract first.

    `measured`: per check, per time bucket (None: rows without one); `rows`: each partition's
    staged rows; `baselines`: per partition, what each relative row_count compares with.
    """
    results: dict[int, list[CheckResult]] = {p.start: [contract] for p in partitions}
    for check in checks:
        values = _attributed(check, measured[check.name], partitions)
        for partition in partitions:
            results[partition.start].append(
                judge(
                    check,
                    values[partition.start],
                    rows.get(partition.start, 0),
                    partition.end,
                    baselines.get(partition.start, {}).get(check.name),
                )
            )
    return results


def _attributed(
    check: CheckSpec, values: Mapping[int | None, int | None], partitions: Sequence[PartitionKey]
) -> dict[int, int | None]:
    """Each partition's measured value. Rows that belong to no partition being written count
    against all of them: stray rows (partition_bounds) and violating rows a query check
    returns with a NULL or foreign partition value."""
    starts = {p.start for p in partitions}
    if check.kind == "partition_bounds":
        # rows outside the window are the only ones counted: all of them are stray
        stray = sum(v or 0 for v in values.values())
        return dict.fromkeys(starts, stray)
    if check.kind in QUERY_KINDS:
        stray = sum(v or 0 for b, v in values.items() if b not in starts)
        return {start: (values.get(start) or 0) + stray for start in starts}
    # a partition with no rows has no bucket: it counts zero, and has no newest value
    empty = None if check.kind == "freshness" else 0
    return {start: values.get(start, empty) for start in starts}


def measure_key_partition(
    engine: Engine,
    checks: Sequence[CheckSpec],
    staging: str,
    bounds: Mapping[str, Any],
    partition: PartitionKey,
) -> dict[str, dict[int | None, int | None]]:
    """A key-list partition is one unit with no time buckets: measure each check on it (but a
    query check, which `measure_queries` runs)."""
    return {
        c.name: {partition.start: engine.measure(c, staging, bounds)}
        for c in checks
        if c.kind not in QUERY_KINDS
    }


def measure_queries(
    engine: Engine,
    spec: ModelSpec,
    checks: Sequence[CheckSpec],
    staging: str,
    tables: Mapping[str, str],
) -> dict[str, dict[int | None, int]]:
    """Each query check as its own statement over the staged unit, counted per partition (a
    key-list unit is one partition: one count)."""
    grain = None if spec.single_unit else spec.grain.value
    return {
        c.name: engine.measure_query(c, staging, tables, spec.partition_column, grain)
        for c in checks
        if c.kind in QUERY_KINDS
    }
