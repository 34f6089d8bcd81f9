"""Run: the scheduler tick, or explicit partitions, executing the active versions only."""

from __future__ import annotations

import os
from dataclasses import dataclass

from tidegate.domain.attempt import AttemptState, RunStatus
from tidegate.domain.clock import SystemTimer, stamp
from tidegate.domain.errors import RefusedError, UsageError
from tidegate.domain.ids import new_run_id
from tidegate.domain.model import Version
from tidegate.domain.partitions import EVERYTHING, PartitionRange
from tidegate.domain.run import Run
from tidegate.execution.executor import Options, Outcome
from tidegate.execution.reconcile import Reconciliation
from tidegate.execution.session import writer_session
from tidegate.ops import correctness
from tidegate.ops.announce import Published, announce, announce_start
from tidegate.ops.backfill import refuse_stream
from tidegate.ops.context import Context
from tidegate.ops.cursor import cursor_batches, cursor_engine, position
from tidegate.ops.schedule import CATCH_UP, due_partitions
from tidegate.ops.taint import tainted_outcomes

FAILED = frozenset({AttemptState.FAILED, AttemptState.SKIPPED})


@dataclass(frozen=True)
class RunResult:
    run_id: str
    status: RunStatus
    reason: str | None
    outcomes: tuple[Outcome, ...]
    reconciliation: Reconciliation
    notes: tuple[str, ...]


def _plan(
    ctx: Context, models: list[str], partition: str | None, force: bool, named: bool
) -> tuple[list[tuple[Version, PartitionRange | None]], list[str]]:
    """Per model, the partitions to run; None for a cursor model, whose interval is read from
    its source once the run holds the warehouse."""
    project, state = ctx.project, ctx.state
    plan: list[tuple[Version, PartitionRange | None]] = []
    notes: list[str] = []
    for name in [m for m in project.order if m in models]:
        model_state = state.model_state(name)
        version = state.active_version(name)
        if version is None:
            if partition is not None or len(models) == 1:
                raise UsageError(
                    f"model {name!r} has no active version; run `tidegate deploy {name}`"
                )
            notes.append(f"{name}: no active version, not run")
            continue
        if version.spec.stream is not None:
            if named:
                refuse_stream(version, "run")
            notes.append(f"{name}: a stream, run by its supervisor")
            continue
        if model_state is not None and model_state.paused:
            if partition is None:
                notes.append(f"{name}: paused, not run")
                continue
            if not force:
                raise RefusedError(
                    f"model {name!r} is paused; `tidegate unpause {name}` first (or --force)"
                )
            notes.append(f"{name}: paused, run anyway (--force)")
        spec = version.spec
        if spec.cursor is not None and partition is None:
            position(state, version)  # refuses a cursor it cannot continue before any write
            plan.append((version, None))
            continue
        if partition is not None:
            chosen = spec.parse_range(partition)
            first = spec.first_partition()
            if first is not None and chosen.start < first.start:
                raise UsageError(f"{name} starts at {spec.start}; {partition} is before it")
        else:
            chosen = due_partitions(ctx, version)
            if len(chosen) == 0:
                written = state.published_intervals(name, *EVERYTHING, version.version_id)
                notes.append(
                    f"{name}: up to date (v{version.seq} published the newest due partition)"
                    if written
                    else f"{name}: no partition due yet"
                )
                continue
            if len(chosen) == CATCH_UP:
                notes.append(
                    f"{name}: catching up the newest {CATCH_UP} due partitions; backfill older ones"
                )
        plan.append((version, chosen))
    return plan, notes


def run(
    ctx: Context, models: list[str], partition: str | None, kind: str = "run", force: bool = False
) -> RunResult:
    """Run the due partitions of `models` (all when empty), or the named partitions of one
    model; `force` runs a paused model's named partitions anyway."""
    project = ctx.project
    for name in models:
        project.model(name)
    if partition is not None and len(models) != 1:
        raise UsageError("--partition needs exactly one MODEL")
    selected = models or list(project.order)
    plan, notes = _plan(ctx, selected, partition, force, named=bool(models))
    pending = correctness.pending_deploys(ctx, [version for version, _ in plan])
    with writer_session(project, ctx.state, ctx.clock, ctx.wait) as session:
        if any(chosen is None for _, chosen in plan):
            cursor_engine(session.engine)
        run_id = new_run_id()
        ctx.state.create_run(
            Run(
                run_id=run_id,
                kind=kind,
                models=tuple(v.model for v, _ in plan),
                partitions=partition or "due",
                requester=ctx.actor,
                status=RunStatus.RUNNING,
                started_at=stamp(ctx.clock),
                pid=os.getpid(),
            )
        )
        announce_start(ctx, run_id, [v.model for v, _ in plan])
        executor = session.executor(SystemTimer())
        outcomes: list[Outcome] = []
        refusals: list[str] = []
        with ctx.closing_run(run_id):
            for version, chosen in plan:
                if chosen is None:
                    batches, note = cursor_batches(ctx, session.engine, run_id, version, outcomes)
                    notes.append(note)
                else:
                    # one partition per batch: a scheduler tick is small, and each partition its
                    # own unit of publish
                    batches = enumerate(
                        PartitionRange(chosen.grain, k.start, k.end, chosen.step) for k in chosen
                    )
                report = executor.execute(
                    run_id, version, batches, Options(on_outcome=outcomes.append)
                )
                refusals += [report.refusal] if report.refusal else []
        bad = [o for o in outcomes if o.state is not AttemptState.PUBLISHED]
        status = RunStatus.FAILED if bad else RunStatus.SUCCEEDED
        reason = (
            f"{len(bad)} of {len(outcomes)} partition(s) not published"
            + "".join(f"; {r}" for r in refusals[:1])
            if bad
            else None
        )
        ctx.state.finish_run(run_id, status, reason, stamp(ctx.clock))
        confirmed = correctness.shadow_previous(session, run_id, pending, outcomes)
    notes += correctness.record(ctx, confirmed)
    notes += tainted_outcomes(ctx, outcomes)
    notes += announce(
        ctx,
        run_id,
        [
            Published(
                version.model,
                f"v{version.seq}",
                any(o.model == version.model and o.state in FAILED for o in outcomes),
                reason,
            )
            for version, _ in plan
        ],
    )
    return RunResult(run_id, status, reason, tuple(outcomes), session.reconciliation, tuple(notes))
