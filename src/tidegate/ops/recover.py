"""Recover: recompute tainted partitions with the active (forward-fixed) versions, upstream
first, then every downstream partition that read them; clear each taint as its partition is
published again, and tell consumers to re-read.

Each model's part is a backfill of its marked partitions through the same write–audit–publish
path and checks. The plan is recorded with the run: `recover resume` continues it from its
checkpoints.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tidegate.domain.attempt import RunStatus
from tidegate.domain.backfill import BackfillPlan
from tidegate.domain.clock import Polled, SystemTimer, Timer, stamp
from tidegate.domain.errors import RefusedError, UsageError
from tidegate.domain.graph import downstream_of
from tidegate.domain.ids import new_run_id
from tidegate.domain.model import Version
from tidegate.domain.partitions import IntervalSet
from tidegate.domain.recover import RecoverPlan, Recovery, Step, plan_recovery
from tidegate.domain.run import Run
from tidegate.execution.executor import Options, Outcome, Report
from tidegate.execution.session import WriterSession, writer_session
from tidegate.ops import preflight
from tidegate.ops.announce import Published, announce, announce_start, labels
from tidegate.ops.backfill import (
    LEDGER_POLL_SECONDS,
    active_version,
    held_back,
    resumable,
    run_of,
    trigger_text,
    verdict,
)
from tidegate.ops.context import Context
from tidegate.state.base import Event

KIND = "recover"
DEFAULT_BATCH_SIZE = 7
EVERY_TAINTED = "tainted"  # what a recovery without --partitions asks for
FILE_KEYS = frozenset({"model", "partitions", "batch_size", "max_concurrency"})


@dataclass(frozen=True)
class Request:
    model: str
    partitions: str | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    max_concurrency: int = 1
    plan_file: str | None = None
    plan_text: str | None = None


@dataclass(frozen=True)
class Result:
    run_id: str
    plan: RecoverPlan
    status: RunStatus
    report: Report
    reason: str | None
    notes: tuple[str, ...]


def make_plan(ctx: Context, request: Request) -> RecoverPlan:
    return make_recovery(ctx, request).plan


def make_recovery(ctx: Context, request: Request) -> Recovery:
    """The open marks of the model (in the range) and, downstream, of the same taints."""
    model = request.model
    version = active_version(ctx, model, command=KIND)
    spec = version.spec
    if spec.update is not None:
        raise UsageError(f"{model} is an update model: a backfill of the range recomputes it")
    if request.partitions is not None:
        chosen = spec.parse_range(request.partitions)
        origin = ctx.state.open_taints(model, chosen.start, chosen.end)
    else:
        origin = ctx.state.open_taints(model)
    if not origin:
        where = f" in {request.partitions}" if request.partitions else ""
        raise UsageError(f"nothing to recover: no partition of {model}{where} is tainted")
    upstream = {name: ctx.project.model(name).upstream for name in ctx.project.order}
    downstream = []
    for name in downstream_of(upstream, model):
        marks = ctx.state.open_taints(name)
        if marks:
            below = active_version(ctx, name, command=KIND)
            downstream.append(Step(name, below.version_id, below.spec.grain, marks))
    return plan_recovery(
        model,
        request.partitions or EVERY_TAINTED,
        origin,
        downstream,
        version.version_id,
        spec.grain,
        request.batch_size,
        request.max_concurrency,
        lambda mark: [
            (i.upstream, i.range_start, i.range_end)
            for i in ctx.state.inputs(mark.attempt_id)
            if i.kind == "model"
        ],
        ctx.state.open_taints,
    )


def from_file(values: dict[str, Any], path: str, text: str) -> Request:
    """A reviewed recovery plan (the runbook, kept in git)."""
    unknown = sorted(set(values) - FILE_KEYS)
    if unknown:
        raise UsageError(
            f"{path}: unknown key {unknown[0]!r} (a recovery plan has "
            f"{', '.join(sorted(FILE_KEYS))})"
        )
    if not isinstance(values.get("model"), str):
        raise UsageError(f"{path}: a recovery plan names its model")
    if not isinstance(values.get("partitions", ""), str):
        raise UsageError(f"{path}: partitions must be text (START..END)")
    for key in ("batch_size", "max_concurrency"):
        if key in values and (not isinstance(values[key], int) or values[key] < 1):
            raise UsageError(f"{path}: {key} must be a whole number of at least 1")
    return Request(
        model=values["model"],
        partitions=values.get("partitions"),
        batch_size=values.get("batch_size", DEFAULT_BATCH_SIZE),
        max_concurrency=values.get("max_concurrency", 1),
        plan_file=path,
        plan_text=text,
    )


def start(
    ctx: Context,
    request: Request,
    stop_flag: threading.Event,
    on_outcome: Callable[[Outcome], None],
    on_step: Callable[[str, BackfillPlan], None],
    timer: Timer | None = None,
) -> Result:
    recovery = make_recovery(ctx, request)
    plan = recovery.plan
    with writer_session(ctx.project, ctx.state, ctx.clock, ctx.wait) as session:
        for step in plan.steps:
            session.refuse_unready(_version(ctx, step.version_id))
        run_id = new_run_id()
        text = request.plan_text
        ctx.state.create_run(
            Run(
                run_id=run_id,
                kind=KIND,
                models=plan.models,
                partitions=plan.requested,
                requester=ctx.actor,
                status=RunStatus.RUNNING,
                started_at=stamp(ctx.clock),
                params={"plan_file": request.plan_file, "plan_text": text},
                pid=os.getpid(),
                plan=plan.to_json(),
                plan_hash=hashlib.sha256(text.encode()).hexdigest() if text else None,
            )
        )
        announce_start(ctx, run_id, plan.models)
        result = _execute(ctx, session, run_id, plan, stop_flag, on_outcome, on_step, timer)
    return replace(result, notes=(*left_notes(ctx, recovery), *result.notes))


def left_notes(ctx: Context, recovery: Recovery) -> list[str]:
    """What a recovery leaves tainted downstream, and why."""
    by_model: dict[str, list[tuple[int, int]]] = {}
    for marked in recovery.left:
        by_model.setdefault(marked.mark.model, []).append((marked.mark.start, marked.mark.end))
    return [
        f"{model} {', '.join(labels(ctx, model, windows))} stays tainted: it also reads tainted "
        "partitions outside this recovery"
        for model, windows in by_model.items()
    ]


def resume(
    ctx: Context,
    run_id: str,
    stop_flag: threading.Event,
    on_outcome: Callable[[Outcome], None],
    on_step: Callable[[str, BackfillPlan], None],
    timer: Timer | None = None,
) -> Result:
    run_of(ctx, run_id, KIND)
    with writer_session(ctx.project, ctx.state, ctx.clock, ctx.wait) as session:
        run = resumable(ctx, run_id, KIND)  # read again: the session reconciled a dead writer
        plan = RecoverPlan.from_json(run.plan or "")
        held = _held(ctx, plan)
        if held is not None:
            raise RefusedError(f"recovery {run_id} cannot resume: {held}")
        for step in plan.steps:
            session.refuse_unready(_version(ctx, step.version_id))
        ctx.state.reopen_run(run_id, os.getpid())
        return _execute(ctx, session, run_id, plan, stop_flag, on_outcome, on_step, timer)


def _execute(
    ctx: Context,
    session: WriterSession,
    run_id: str,
    plan: RecoverPlan,
    stop_flag: threading.Event,
    on_outcome: Callable[[Outcome], None],
    on_step: Callable[[str, BackfillPlan], None],
    timer: Timer | None,
) -> Result:
    total = Report()
    timer = timer or SystemTimer()
    held = Polled(
        lambda: ctx.state.stop_requested(run_id) or _held(ctx, plan) is not None,
        timer,
        LEDGER_POLL_SECONDS,
    )
    with ctx.closing_run(run_id, "aborted (Ctrl-C twice)"):
        for step in plan.steps:
            version = _version(ctx, step.version_id)
            # resume: what this run already published of the model is done
            done = IntervalSet.of(ctx.state.run_checkpoints(run_id, step.model))
            if not IntervalSet(step.selection).minus(done):
                continue
            on_step(run_id, step)
            report = session.executor(timer).execute(
                run_id,
                version,
                enumerate(step.batches(skip=done)),
                Options(
                    max_concurrency=step.max_concurrency,
                    batches=step.batch_count(done),
                    stop_loss=step.stop_loss,
                    stop_requested=lambda: stop_flag.is_set() or held(),
                    on_outcome=on_outcome,
                    rebuild=True,
                ),
            )
            _add(total, report)
            if report.trigger is not None or report.stopped:
                break
    status, reason = verdict(total, "recover", run_id)
    trigger = None if total.trigger is None else trigger_text(total.trigger)
    ended = stamp(ctx.clock)
    ctx.state.finish_run(
        run_id, status, reason, ended, trigger, _recovered(ctx, run_id, plan, status, ended)
    )
    notes = announce(
        ctx,
        run_id,
        [
            Published(
                step.model,
                _seq(ctx, step.version_id),
                status is RunStatus.FAILED,
                reason,
                stopped=status is RunStatus.STOPPED,
            )
            for step in plan.steps
        ],
    )
    return Result(run_id, plan, status, total, reason, tuple(notes))


def _recovered(
    ctx: Context, run_id: str, plan: RecoverPlan, status: RunStatus, at: str
) -> list[Event]:
    """A `recover` history event for each model the run recomputed partitions of (a resume's
    checkpoints include what the run published before it stopped), so a model's history says
    its partitions were replaced and by which run."""
    recovered = []
    for step in plan.steps:
        windows = ctx.state.run_checkpoints(run_id, step.model)
        if not windows:
            continue
        recovered.append(
            Event(
                kind=KIND,
                actor=ctx.actor,
                at=at,
                model=step.model,
                version_id=step.version_id,
                run_id=run_id,
                detail={
                    "origin": plan.model,
                    "partitions": list(labels(ctx, step.model, windows)),
                    "status": status.value,
                },
            )
        )
    return recovered


def refuse_unready_now(ctx: Context, plan: RecoverPlan) -> None:
    """For a dry run: what the recovery itself would refuse before it starts."""
    preflight.refuse_unready_now(ctx, *[_version(ctx, s.version_id) for s in plan.steps])


def _version(ctx: Context, version_id: str) -> Version:
    version = ctx.state.get_version(version_id)
    if version is None:
        raise UsageError(f"version {version_id} of the plan is not in the ledger")
    return version


def _held(ctx: Context, plan: RecoverPlan) -> str | None:
    """Why an operator's later decision holds the recovery back: a model of it was paused, or
    rolled back from the version the plan writes it with."""
    return next((r for step in plan.steps if (r := held_back(ctx, step)) is not None), None)


def _add(total: Report, report: Report) -> None:
    total.published += report.published
    total.failed += report.failed
    total.skipped += report.skipped
    total.rows += report.rows
    total.progress = replace(
        total.progress, source_rows=total.progress.source_rows + report.progress.source_rows
    )
    total.trigger = total.trigger or report.trigger
    total.stopped = total.stopped or report.stopped
    total.refusal = total.refusal or report.refusal


def _seq(ctx: Context, version_id: str) -> str:
    version = ctx.state.get_version(version_id)
    return f"v{version.seq}" if version else version_id
