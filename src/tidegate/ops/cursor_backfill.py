"""Backfill of a cursor model: (committed cursor, watermark] in batches of at most N source
rows, with the throttle, stop-loss, stop and resume of any backfill. The plan records the
interval and the batch size; `resume` continues it from the run's checkpoints, and only while
the model's cursor is still where the run left it (another run that moved it has processed
those rows already)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from itertools import islice

from tidegate.domain.attempt import RunStatus
from tidegate.domain.backfill import BackfillPlan, StopLoss
from tidegate.domain.clock import SystemTimer, stamp
from tidegate.domain.cursor import cursor_bounds
from tidegate.domain.errors import RefusedError, UsageError
from tidegate.domain.ids import new_run_id
from tidegate.domain.model import Version
from tidegate.domain.partitions import Grain, IntervalSet, PartitionRange
from tidegate.domain.run import Run
from tidegate.engines.factory import open_engine
from tidegate.execution.executor import Outcome
from tidegate.execution.session import WriterSession
from tidegate.ops.context import Context
from tidegate.ops.cursor import batches, cursor_of, failed_of, plan_run, position

Batches = Iterator[tuple[int, PartitionRange]]


def check_request(version: Version, partitions: str, stale_only: bool, concurrency: int) -> None:
    """A cursor backfill takes everything past the committed cursor, one batch at a time."""
    if partitions != "all":
        raise UsageError(
            f"{version.model} is a cursor model: backfill it with --partitions all (everything "
            "past its committed cursor, up to the watermark)"
        )
    if stale_only:
        raise UsageError("--stale-only is for partitioned models: a cursor model has no stale")
    if concurrency != 1:
        raise UsageError(
            "a cursor model's batches publish in cursor order, one at a time: --max-concurrency 1"
        )


def rows_per_batch(version: Version, batch_size: int) -> int | None:
    """--batch-size N (N > 1) source rows per batch; otherwise the model's cursor_batch_rows,
    or the whole interval in one batch (None)."""
    return batch_size if batch_size > 1 else cursor_of(version).batch_rows


def template(
    version: Version, batch_size: int, rate: int | None, stop_loss: StopLoss
) -> BackfillPlan:
    """A cursor backfill's plan but its interval; the batch size it records is the rows per
    batch (1: the whole interval), which reads the same way on resume."""
    return BackfillPlan(
        model=version.model,
        version_id=version.version_id,
        grain=Grain.CURSOR,
        selection=(),
        batch_size=rows_per_batch(version, batch_size) or 1,
        rate_per_minute=rate,
        stop_loss=stop_loss,
    )


def blast_radius(
    ctx: Context, version: Version, template: BackfillPlan
) -> tuple[BackfillPlan, dict[str, object]]:
    """What a backfill would process now, read with the warehouse opened read-only: the
    interval up to the watermark, its source rows, the first batches. Writes nothing."""
    cursor = cursor_of(version)
    engine = open_engine(ctx.project, ctx.wait, read_only=True)
    try:
        decided = plan_run(ctx, engine, "", version, SystemTimer())
        interval = decided.interval
        if interval is None:
            raise UsageError(
                f"nothing to backfill: {version.model} is up to date ({decided.mark.reason})"
            )
        rows = rows_per_batch(version, template.batch_size)
        bounds = cursor_bounds(cursor.kind, *interval)
        count = engine.cursor_fingerprint(cursor.table, cursor.column, bounds)[0].rows
        shown = [b.label() for _, b in islice(batches(engine, cursor, interval, rows, _never), 10)]
    finally:
        engine.close()
    planned = -(-count // rows) if rows else 1
    per_batch = ctx.state.mean_publish_seconds(version.model)
    plan = replace(template, selection=(interval,), requested="all")
    return plan, {
        "partitions": planned,
        "batches": planned,
        "ranges": [PartitionRange(Grain.CURSOR, *interval).label()],
        "first_batches": shown,
        "source_rows": {cursor.source: count},
        "downstream": [],
        "refused": [],
        "estimated_seconds": None if per_batch is None else round(per_batch * planned, 1),
        # a cursor model appends new rows: it updates no table in place
        "update": None,
    }


def _never() -> bool:
    return False


def plan_and_create(
    ctx: Context,
    session: WriterSession,
    version: Version,
    template: BackfillPlan,
    params: dict[str, str | None],
    plan_hash: str | None,
) -> tuple[str, BackfillPlan]:
    """Read the watermark, record the run with its plan (the interval; `template` gives the
    rest) and its cursor mark."""
    run_id = new_run_id()
    decided = plan_run(ctx, session.engine, run_id, version, SystemTimer())
    interval = decided.interval
    if interval is None:
        raise UsageError(
            f"nothing to backfill: {version.model} is up to date ({decided.mark.reason})"
        )
    plan = BackfillPlan(
        model=template.model,
        version_id=version.version_id,
        grain=Grain.CURSOR,
        selection=(interval,),
        batch_size=template.batch_size,
        rate_per_minute=template.rate_per_minute,
        stop_loss=template.stop_loss,
        requested="all",
    )
    ctx.state.create_run(
        Run(
            run_id=run_id,
            kind="backfill",
            models=(plan.model,),
            partitions=plan.requested,
            requester=ctx.actor,
            status=RunStatus.RUNNING,
            started_at=stamp(ctx.clock),
            params=params,
            pid=os.getpid(),
            plan=plan.to_json(),
            plan_hash=plan_hash,
        )
    )
    ctx.state.record_cursor_mark(decided.mark)
    return run_id, plan


def remaining_batches(
    ctx: Context,
    session: WriterSession,
    version: Version,
    plan: BackfillPlan,
    done: IntervalSet,
    outcomes: list[Outcome],
) -> Batches:
    """The batches of the plan's interval the run has not published; refused when the model's
    cursor moved elsewhere since (its rows were processed by another run)."""
    left = IntervalSet(plan.selection).minus(done).intervals
    if not left:
        return iter(())
    start, end = left[0]
    cursor = cursor_of(version)
    where = position(ctx.state, version)
    # nothing committed yet: the plan starts before the source's first row
    if where.value is not None and where.value != start:
        at = "nowhere" if where.value is None else cursor.show(where.value)
        raise RefusedError(
            f"the cursor of {plan.model} is at {at}, not where this backfill stopped "
            f"({cursor.show(start)}): another run processed past it; start a new backfill"
        )
    rows = rows_per_batch(version, plan.batch_size)
    return batches(session.engine, cursor, (start, end), rows, failed_of(plan.model, outcomes))


def recording(
    on_outcome: Callable[[Outcome], None], outcomes: list[Outcome]
) -> Callable[[Outcome], None]:
    """`on_outcome`, keeping each outcome in `outcomes` too (no batch after a failed one)."""

    def record(outcome: Outcome) -> None:
        outcomes.append(outcome)
        on_outcome(outcome)

    return record
