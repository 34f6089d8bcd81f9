"""Run by the tests in the Dagster environment (tests/dagster/kit.py): loads a definitions file
and prints what Dagster made of it as one JSON document on stdout.

    materialize.py DEFINITIONS describe
    materialize.py DEFINITIONS materialize ASSET [FIRST [LAST]]

`describe`: every asset's key, dependencies, partitions (kind, first keys), backfill policy and
checks. `materialize`: Dagster's `materialize()` of ASSET (all assets loaded, ASSET selected) over
the partition key range FIRST..LAST (one key: FIRST; none: unpartitioned), in an ephemeral
instance: whether the run succeeded, its materializations, check evaluations, failures and how
often Dagster retried the step.
"""

from __future__ import annotations

import json
import runpy
import sys
from typing import Any

import dagster as dg
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)


def values(metadata: Any) -> dict[str, Any]:
    return {k: getattr(v, "value", v) for k, v in metadata.items()}


def describe(assets: list[dg.AssetsDefinition]) -> dict[str, Any]:
    found = {}
    for asset in assets:
        for spec in asset.specs:
            partitions = spec.partitions_def
            found[spec.key.to_user_string()] = {
                "deps": sorted(d.asset_key.to_user_string() for d in spec.deps),
                "partitions": None
                if partitions is None
                else {
                    "kind": type(partitions).__name__,
                    "first": partitions.get_partition_keys()[:3],
                },
                "backfill_policy": str(asset.backfill_policy.policy_type)
                if asset.backfill_policy
                else None,
                "checks": sorted(k.name for k in asset.check_keys),
                "group": spec.group_name,
            }
    return {"assets": found}


def materialize(assets: list[dg.AssetsDefinition], asset: str, keys: list[str]) -> dict[str, Any]:
    tags: dict[str, str] = {}
    partition_key = None
    if len(keys) == 1:
        partition_key = keys[0]
    elif len(keys) == 2:
        tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[1]}
    result = dg.materialize(
        assets,
        instance=dg.DagsterInstance.ephemeral(),
        selection=[asset],
        partition_key=partition_key,
        tags=tags,
        raise_on_error=False,
    )
    materializations = [
        {
            "asset": event.asset_key.to_user_string(),
            "partition": event.partition,
            "metadata": values(event.materialization.metadata),
        }
        for event in result.get_asset_materialization_events()
    ]
    checks = [
        {
            "asset": e.asset_key.to_user_string(),
            "name": e.check_name,
            "passed": e.passed,
            "severity": e.severity.value,
            "metadata": values(e.metadata),
        }
        for e in result.get_asset_check_evaluations()
    ]
    failures = []
    for event in result.all_events:
        if event.event_type_value == "STEP_FAILURE":
            data = event.step_failure_data
            failures.append(
                {
                    "message": data.error.message.strip() if data.error else "",
                    "description": data.user_failure_data.description
                    if data.user_failure_data
                    else None,
                    "metadata": values(data.user_failure_data.metadata)
                    if data.user_failure_data
                    else {},
                }
            )
    retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    return {
        "success": result.success,
        "retries": len(retries),
        "materializations": materializations,
        "checks": checks,
        "failures": failures,
    }


def main(argv: list[str]) -> None:
    definitions: dg.Definitions = runpy.run_path(argv[0])["defs"]
    assets = list(definitions.assets or ())
    describing = argv[1] == "describe"
    report = describe(assets) if describing else materialize(assets, argv[2], argv[3:])
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
