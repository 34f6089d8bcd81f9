"""Backfill of a cursor model: (committed cursor, watermark] in batches of at most N source
rows, with the throttle, stop-loss, stop and resume of any backfill. The plan records the
interval and the batch size; `resume` continues it from the run's checkpoints, and only while
the model's cursor is still where the run left it (another run that moved it has processed
those rows already)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from tidegate.domain.attempt import RunStatus
from tidegate.domain.backfill import BackfillPlan
from tidegate.domain.clock import SystemTimer, stamp
from tidegate.domain.errors import RefusedError, UsageError
from tidegate.domain.ids import new_run_id
from tidegate.domain.model import Version
from tidegate.domain.partitions import Grain, IntervalSet, PartitionRange
from tidegate.domain.run import Run
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
