"""Deploy preflight: before a version becomes active, can it read its inputs and write its
target? Read-only: the warehouse is opened for reading and the query is planned, not run. Dry
runs ask the same of the versions they would run."""

from __future__ import annotations

from tidegate.domain.model import Version
from tidegate.engines.factory import open_engine, warehouse_problems
from tidegate.execution.readiness import refuse_unready, version_problems
from tidegate.ops.context import Context


def preflight(ctx: Context, version: Version) -> list[str]:
    """What would stop `version` from running: an unreachable or read-only warehouse, a missing
    source table, time column or key column, a query the engine cannot plan, output that breaks the
    contract, or a published table whose columns the version would have to retype. A stream
    model's: its code gone, or its checkpoint location unwritable."""
    if version.spec.stream is not None:
        from tidegate.ops.stream_release import stream_problems

        return stream_problems(ctx, version)
    problems = warehouse_problems(ctx.project)
    if problems:
        return problems
    engine = open_engine(ctx.project, ctx.wait, read_only=True)
    try:
        return version_problems(engine, ctx.project, version)
    finally:
        engine.close()


def refuse_unready_now(ctx: Context, *versions: Version) -> None:
    """For a dry run: what the operation itself would refuse before it starts (the warehouse
    as it is now cannot run one of its versions), with the warehouse opened read-only."""
    for version in versions:
        refuse_unready(version, preflight(ctx, version))
