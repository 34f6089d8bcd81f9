"""The Dagster assets of a tidegate project: one per model, its partitions from its grain, its
dependencies from the model graph, a single-run backfill policy, and one asset check per
declared check. Materializing runs one tidegate command; its result becomes Dagster events:
one materialization per published partition, one check result per evaluated check, and a
`Failure` with tidegate's one-line reason when the command did not succeed.
"""

# no `from __future__ import annotations`: Dagster reads the compute function's context
# annotation at definition time, so it must be the class itself, not a string
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from tidegate.dagster.partitioning import Kind, Partitioning, partitioning
from tidegate.dagster.requests import request
from tidegate.dagster.results import check_outcomes, metadata, published_partitions
from tidegate.domain.model import ModelSpec
from tidegate.orchestration import invoke, run_document
from tidegate.project.loader import load_project


def tidegate_assets(
    project: Path | str,
    *,
    models: Iterable[str] | None = None,
    key_prefix: Sequence[str] = (),
    group_name: str | None = None,
    program: Sequence[str] | None = None,
    options: Sequence[str] = (),
    retry_policy: Any = None,
) -> list[dg.AssetsDefinition]:
    """One asset per model of the project at `project` (all models, or `models`), keyed by the
    model's name under `key_prefix`, in the group `group_name` (the project's name by default).

    `program` is how to start tidegate (by default the `tidegate` beside this interpreter, on
    PATH, or `python -m tidegate`); `options` are further flags of each backfill (e.g.
    `("--batch-size", "7")`); `retry_policy` a Dagster `RetryPolicy` for failures worth a retry
    (exit codes 1 and 4).
    """
    root = Path(project).resolve()
    loaded = load_project(root)
    group = group_name or loaded.settings.project.name
    chosen = set(loaded.order if models is None else models)
    for name in chosen:
        loaded.model(name)  # an unknown name is a usage error, named
    return [
        _asset(
            loaded.models[name],
            root,
            key_prefix=tuple(key_prefix),
            group=group,
            program=program,
            options=tuple(options),
            retry_policy=retry_policy,
        )
        for name in loaded.order
        if name in chosen
    ]


def partitions_definition(found: Partitioning) -> dg.PartitionsDefinition | None:
    """The Dagster partitions definition of a model's partitioning (None: unpartitioned)."""
    if found.kind is Kind.DAILY:
        return dg.DailyPartitionsDefinition(start_date=found.start, fmt=found.fmt)
    if found.kind is Kind.HOURLY:
        return dg.HourlyPartitionsDefinition(start_date=found.start, fmt=found.fmt)
    if found.kind is Kind.MONTHLY:
        return dg.MonthlyPartitionsDefinition(start_date=found.start, fmt=found.fmt)
    if found.kind is Kind.STATIC:
        return dg.StaticPartitionsDefinition(list(found.keys))
    return None


def _asset(
    spec: ModelSpec,
    root: Path,
    *,
    key_prefix: tuple[str, ...],
    group: str,
    program: Sequence[str] | None,
    options: tuple[str, ...],
    retry_policy: Any,
) -> dg.AssetsDefinition:
    key = dg.AssetKey([*key_prefix, spec.name])
    partitions = partitions_definition(partitioning(spec))
    asset = dg.AssetSpec(
        key,
        deps=[dg.AssetKey([*key_prefix, upstream]) for upstream in spec.upstream],
        partitions_def=partitions,
        group_name=group,
        description=f"tidegate model {spec.name} ({spec.grain.value} grain)",
        kinds={"tidegate"},
        metadata={"tidegate/project": str(root), "tidegate/grain": spec.grain.value},
    )
    checks = [
        dg.AssetCheckSpec(check.name, asset=key, description=f"tidegate {check.kind} check")
        for check in spec.checks
    ]

    def materialize(context: dg.AssetExecutionContext) -> Iterator[Any]:
        if key not in context.selected_asset_keys:
            # the checks alone were selected: tidegate evaluates them while it publishes, so
            # there is nothing to run without materializing
            context.log.info(f"{spec.name}: checks run with a materialization; nothing to do")
            return
        keys = None
        if partitions is not None:
            found = context.partition_key_range
            keys = (found.start, found.end)
        invocation = request(spec, root, keys, options)
        context.log.info("tidegate " + " ".join(invocation.arguments()))
        outcome = invoke(invocation, program=program)
        run_id = outcome.run_id
        run = run_document(run_id, root, program=program) if run_id else {}
        for done in published_partitions(run, spec.name):
            yield dg.AssetMaterialization(
                asset_key=key,
                partition=done.partition if partitions is not None else None,
                metadata=metadata(run_id or "", done),
            )
        selected = context.selected_asset_check_keys
        for check in check_outcomes(run, spec.name, spec.checks):
            if dg.AssetCheckKey(key, check.name) not in selected:
                continue
            yield dg.AssetCheckResult(
                asset_key=key,
                check_name=check.name,
                passed=check.passed,
                severity=dg.AssetCheckSeverity.WARN if check.warn else dg.AssetCheckSeverity.ERROR,
                metadata={
                    "tidegate/run": run_id or "",
                    "partitions": list(check.partitions),
                    "failed_partitions": list(check.failed_partitions),
                },
            )
        if not outcome.succeeded:
            raise dg.Failure(
                description=outcome.reason,
                metadata={"tidegate/exit_code": outcome.exit_code, "tidegate/run": run_id or ""},
                allow_retries=outcome.retryable,
            )

    return dg.multi_asset(
        name="__".join([*key_prefix, spec.name]),
        specs=[asset],
        check_specs=checks,
        can_subset=True,
        backfill_policy=dg.BackfillPolicy.single_run(),
        retry_policy=retry_policy,
    )(materialize)
