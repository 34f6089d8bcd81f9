"""Backfill: recompute a historical range in throttled batches — stoppable, resumable, verifiable.

The plan (range, selection, batching, throttle, stop-loss, version) is recorded with the run;
`resume` continues that plan from its checkpoints, never one recomputed from today's date or code.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from tidegate.domain.attempt import RunStatus
from tidegate.domain.backfill import BackfillPlan, StopLoss, Trigger, carried_starts, parse_rate
from tidegate.domain.clock import Polled, SystemClock, SystemTimer, Timer, stamp
from tidegate.domain.errors import ConfigError, RefusedError, UsageError
from tidegate.domain.graph import downstream_of
from tidegate.domain.ids import looks_like_run_id, new_run_id
from tidegate.domain.model import ModelSpec, Version, WriteMode
from tidegate.domain.partitions import Grain, IntervalSet, PartitionRange, example_range
from tidegate.domain.run import Run
from tidegate.domain.taint import MarkKind
from tidegate.domain.throttle import THROTTLE_EVENT, AdaptiveThrottle, Adjustment, parse_seconds
from tidegate.engines.base import window_bounds
from tidegate.engines.factory import open_engine
from tidegate.execution.executor import Options, Outcome, Report
from tidegate.execution.session import WriterSession, writer_session
from tidegate.execution.update import Limits, rows_outside_ranges
from tidegate.ops import cursor_backfill, key_ranges
from tidegate.ops.announce import Published, announce, announce_start
from tidegate.ops.context import Context
from tidegate.ops.preflight import refuse_unready_now
from tidegate.project import toml_errors
from tidegate.state.base import Event

KIND = "backfill"
# the marks whose partitions `--stale-only` recomputes besides those another version wrote (a
# declared taint is `recover`'s: it reaches downstream)
RECOMPUTED_MARKS = frozenset({MarkKind.STALE, MarkKind.DIVERGED, MarkKind.MISSING})
# `backfill stop`, a pause or a rollback from another process is read from the ledger at most this
# often: reading it between every two batches costs more than the batches of a small partition
LEDGER_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Request:
    """What the user asked for, from flags or from a reviewed plan file."""

    model: str
    partitions: str
    batch_size: int = 1
    max_concurrency: int = 1
    rate: str | None = None
    stop_loss: StopLoss = field(default_factory=StopLoss)
    stale_only: bool = False
    plan_file: str | None = None
    plan_text: str | None = None
    force_paused: bool = False  # --force: backfill a paused model anyway
    # durations such as "2s": an update's transaction bounds, the adaptive throttle's bound
    lock_timeout: str | None = None
    statement_timeout: str | None = None
    max_batch_latency: str | None = None


class Watch(Protocol):
    """What a live display is told besides outcomes: batch starts and rate waits."""

    def batch(self, index: int, window: PartitionRange, at: float) -> None: ...

    def waiting(self, seconds: float) -> None: ...

    def resumed(self, published: int) -> None: ...


@dataclass(frozen=True)
class Result:
    run_id: str
    plan: BackfillPlan
    status: RunStatus
    report: Report
    reason: str | None
    notes: tuple[str, ...] = ()


def active_version(
    ctx: Context, model: str, force_paused: bool = False, command: str = KIND
) -> Version:
    ctx.project.model(model)
    state = ctx.state.model_state(model)
    version = ctx.state.active_version(model)
    if version is None:
        raise UsageError(f"model {model!r} has no active version; run `tidegate deploy {model}`")
    refuse_stream(version, command)
    if state is not None and state.paused and not force_paused:
        override = " (or --force)" if command == KIND else ""
        raise RefusedError(f"model {model!r} is paused; `tidegate unpause {model}` first{override}")
    return version


def refuse_stream(version: Version, command: str) -> None:
    """A stream model has no partitions to compute: its job runs under its supervisor."""
    if version.spec.stream is not None:
        raise UsageError(
            f"{version.model} is a stream model: `tidegate {command}` computes partitions, "
            f"a stream runs under `tidegate stream start {version.model}` and is released with "
            "deploy, rollback, pause and unpause"
        )


def selected_windows(ctx: Context, request: Request) -> tuple[str, list[tuple[int, int]]]:
    """The model and the windows a backfill request would recompute."""
    plan = make_plan(ctx, request)
    return plan.model, list(plan.selection)


def make_plan(ctx: Context, request: Request) -> BackfillPlan:
    version = active_version(ctx, request.model, request.force_paused)
    spec = version.spec
    if spec.cursor is not None:
        raise UsageError(
            f"{spec.name} is a cursor model: its backfill reads its interval when it starts "
            "(a distributed backfill of a cursor model is not supported yet)"
        )
    limits = [
        None if text is None else parse_seconds(text, flag)
        for text, flag in (
            (request.lock_timeout, "--lock-timeout"),
            (request.statement_timeout, "--statement-timeout"),
            (request.max_batch_latency, "--max-batch-latency"),
        )
    ]
    if spec.update is None and (limits[0] is not None or limits[1] is not None):
        raise UsageError("--lock-timeout and --statement-timeout are for update models")
    chosen = (
        key_ranges.resolve(ctx, spec, request.partitions)
        if spec.update is not None
        else spec.parse_range(request.partitions)
    )
    first = spec.first_partition()
    if first is not None and chosen.start < first.start:
        raise UsageError(f"{spec.name} starts at {spec.start}; {request.partitions} is before it")
    if spec.keys and request.batch_size != 1:
        one = (
            "a whole-table model's one partition is a batch of its own"
            if spec.grain is Grain.TABLE
            else "key-list partitions are backfilled one per batch"
        )
        raise UsageError(f"{one}: use --batch-size 1")
    selection = IntervalSet.of([(chosen.start, chosen.end)])
    if request.stale_only:
        mine = ctx.state.published_intervals(
            spec.name, chosen.start, chosen.end, version.version_id
        )
        # written by the active version, yet not to be trusted: found diverged from or missing
        # in the warehouse (`verify --repair`), or built on upstream content since replaced
        marked = [
            (t.mark.start, t.mark.end)
            for t in ctx.state.open_taints(spec.name, chosen.start, chosen.end)
            if t.kind in RECOMPUTED_MARKS and chosen.start <= t.mark.start < chosen.end
        ]
        selection = IntervalSet.of([*selection.minus(IntervalSet.of(mine)).intervals, *marked])
    refused = _published_once(ctx, spec, chosen.start, chosen.end)
    if refused and not selection.minus(refused):
        raise UsageError(
            f"nothing to backfill: {spec.name} appends without a unique key and every partition "
            f"in {request.partitions} is published already; appending again would duplicate rows"
        )
    selection = selection.minus(refused)
    return BackfillPlan(
        model=spec.name,
        version_id=version.version_id,
        grain=spec.grain,
        selection=selection.intervals,
        batch_size=request.batch_size,
        max_concurrency=request.max_concurrency,
        rate_per_minute=parse_rate(request.rate),
        stop_loss=request.stop_loss,
        stale_only=request.stale_only,
        # an update model's `all` as resolved from its table now: resume keeps it
        requested=chosen.label() if spec.update is not None else request.partitions,
        chunk_size=spec.chunk_size,
        lock_timeout=limits[0],
        statement_timeout=limits[1],
        max_batch_latency=limits[2],
    )


def start(
    ctx: Context,
    request: Request,
    stop_flag: threading.Event,
    on_outcome: Callable[[Outcome], None],
    on_start: Callable[[str, BackfillPlan], None],
    timer: Timer | None = None,
    on_throttle: Callable[[Adjustment], None] = lambda _: None,
    watch: Watch | None = None,
) -> Result:
    version = active_version(ctx, request.model, request.force_paused)
    if version.spec.cursor is not None:
        return _start_cursor(
            ctx, request, version, stop_flag, on_outcome, on_start, timer, on_throttle, watch
        )
    plan = make_plan(ctx, request)
    refuse_empty(plan, request)
    with writer_session(ctx.project, ctx.state, ctx.clock, ctx.wait) as session:
        session.refuse_unready(version)
        run_id = new_run_id()
        ctx.state.create_run(
            Run(
                run_id=run_id,
                kind=KIND,
                models=(plan.model,),
                partitions=plan.requested,
                requester=ctx.actor,
                status=RunStatus.RUNNING,
                started_at=stamp(ctx.clock),
                params={"plan_file": request.plan_file, "plan_text": request.plan_text},
                pid=os.getpid(),
                plan=plan.to_json(),
                plan_hash=plan_hash(request),
            )
        )
        announce_start(ctx, run_id, [plan.model])
        on_start(run_id, plan)
        return _execute(
            ctx,
            session,
            run_id,
            plan,
            IntervalSet(),
            stop_flag,
            on_outcome,
            timer,
            on_throttle,
            request.force_paused,
            watch=watch,
        )


def _start_cursor(
    ctx: Context,
    request: Request,
    version: Version,
    stop_flag: threading.Event,
    on_outcome: Callable[[Outcome], None],
    on_start: Callable[[str, BackfillPlan], None],
    timer: Timer | None,
    on_throttle: Callable[[Adjustment], None],
    watch: Watch | None = None,
) -> Result:
    """A cursor model's backfill: its interval is read from the source once the run holds
    the warehouse (see ops/cursor_backfill.py)."""
    template = _cursor_template(version, request)
    with writer_session(ctx.project, ctx.state, ctx.clock, ctx.wait) as session:
        session.refuse_unready(version)
        run_id, plan = cursor_backfill.plan_and_create(
            ctx,
            session,
            version,
            template,
            {"plan_file": request.plan_file, "plan_text": request.plan_text},
            plan_hash(request),
        )
        announce_start(ctx, run_id, [plan.model])
        on_start(run_id, plan)
        outcomes: list[Outcome] = []
        found = cursor_backfill.remaining_batches(
            ctx, session, version, plan, IntervalSet(), outcomes
        )
        return _execute(
            ctx,
            session,
            run_id,
            plan,
            IntervalSet(),
            stop_flag,
            cursor_backfill.recording(on_outcome, outcomes),
            timer,
            on_throttle,
            request.force_paused,
            found,
            watch,
        )


def _cursor_template(version: Version, request: Request) -> BackfillPlan:
    cursor_backfill.check_request(
        version, request.partitions, request.stale_only, request.max_concurrency
    )
    if request.lock_timeout is not None or request.statement_timeout is not None:
        raise UsageError("--lock-timeout and --statement-timeout are for update models")
    latency = request.max_batch_latency
    template = cursor_backfill.template(
        version, request.batch_size, parse_rate(request.rate), request.stop_loss
    )
    if latency is None:
        return template
    return replace(template, max_batch_latency=parse_seconds(latency, "--max-batch-latency"))


def dry_run(ctx: Context, request: Request) -> tuple[BackfillPlan, dict[str, Any]]:
    """The plan a backfill would follow and its blast radius; writes nothing."""
    version = active_version(ctx, request.model, request.force_paused)
    if version.spec.cursor is not None:
        template = _cursor_template(version, request)
        refuse_unready_now(ctx, version)
        return cursor_backfill.blast_radius(ctx, version, template)
    plan = make_plan(ctx, request)
    # what the backfill itself would refuse, before its plan is shown
    refuse_unready_now(ctx, version)
    return plan, blast_radius(ctx, plan)


def refuse_empty(plan: BackfillPlan, request: Request) -> None:
    if plan.partitions == 0:
        raise UsageError(
            f"nothing to backfill: every partition in {request.partitions} is "
            "already published by the active version"
        )


def plan_hash(request: Request) -> str | None:
    """The hash of the reviewed plan file a run was started from, stored with it."""
    return hashlib.sha256(request.plan_text.encode()).hexdigest() if request.plan_text else None


def resume(
    ctx: Context,
    run_id: str,
    stop_flag: threading.Event,
    on_outcome: Callable[[Outcome], None],
    on_start: Callable[[str, BackfillPlan], None],
    timer: Timer | None = None,
    on_throttle: Callable[[Adjustment], None] = lambda _: None,
    watch: Watch | None = None,
) -> Result:
    run_of(ctx, run_id)
    with writer_session(ctx.project, ctx.state, ctx.clock, ctx.wait) as session:
        run = resumable(ctx, run_id)  # read again: the session reconciled a dead writer
        plan = BackfillPlan.from_json(run.plan or "")
        held = held_back(ctx, plan)
        if held is not None:
            raise RefusedError(f"backfill {run_id} cannot resume: {held}")
        session.refuse_unready(_version_of(ctx, plan))
        done = IntervalSet.of(ctx.state.run_checkpoints(run_id, plan.model))
        found: cursor_backfill.Batches | None = None
        if plan.grain is Grain.CURSOR:
            outcomes: list[Outcome] = []
            found = cursor_backfill.remaining_batches(
                ctx, session, _version_of(ctx, plan), plan, done, outcomes
            )
            on_outcome = cursor_backfill.recording(on_outcome, outcomes)
        ctx.state.reopen_run(run_id, os.getpid())
        on_start(run_id, plan)
        if watch is not None and plan.grain is not Grain.CURSOR:
            # a cursor's checkpoints are intervals of its values, not partitions to count
            watch.resumed(sum(len(r) for r in done.ranges(plan.grain, plan.chunk_size)))
        return _execute(
            ctx,
            session,
            run_id,
            plan,
            done,
            stop_flag,
            on_outcome,
            timer,
            on_throttle,
            batches=found,
            watch=watch,
        )


def _version_of(ctx: Context, plan: BackfillPlan) -> Version:
    version = ctx.state.get_version(plan.version_id)
    if version is None:
        raise UsageError(f"version {plan.version_id} of the plan is not in the ledger")
    return version


def _execute(
    ctx: Context,
    session: WriterSession,
    run_id: str,
    plan: BackfillPlan,
    done: IntervalSet,
    stop_flag: threading.Event,
    on_outcome: Callable[[Outcome], None],
    timer: Timer | None,
    on_throttle: Callable[[Adjustment], None],
    force_paused: bool = False,
    batches: cursor_backfill.Batches | None = None,
    watch: Watch | None = None,
) -> Result:
    """Run the plan's batches (`batches` when given: a cursor model's), skipping `done`."""
    version = _version_of(ctx, plan)
    timer = timer or SystemTimer()
    held = Polled(
        lambda: ctx.state.stop_requested(run_id) or held_back(ctx, plan, force_paused) is not None,
        timer,
        LEDGER_POLL_SECONDS,
    )

    def throttled(adjustment: Adjustment) -> None:
        record_adjustment(ctx, run_id, plan.model, adjustment)
        on_throttle(adjustment)

    options = Options(
        max_concurrency=plan.max_concurrency,
        batches=None if batches is not None else plan.batch_count(done),
        rate_per_minute=plan.rate_per_minute,
        earlier_starts=earlier_starts(ctx, run_id, plan, timer),
        stop_loss=plan.stop_loss,
        stop_requested=lambda: stop_flag.is_set() or held(),
        on_outcome=on_outcome,
        limits=Limits(plan.lock_timeout, plan.statement_timeout),
        adaptive=None
        if plan.max_batch_latency is None
        else AdaptiveThrottle(plan.max_batch_latency, plan.rate_per_minute),
        on_throttle=throttled,
        on_batch=watch.batch if watch is not None else lambda *_: None,
        on_wait=watch.waiting if watch is not None else lambda _: None,
    )
    # `resume` continues a run cut short from its checkpoints
    with ctx.closing_run(run_id, "aborted (Ctrl-C twice)"):
        report = session.executor(timer).execute(
            run_id, version, batches or enumerate(plan.batches(skip=done)), options
        )
    status, reason = verdict(report, run_id=run_id)
    if status is RunStatus.SUCCEEDED and version.spec.update is not None:
        # every range published; rows in no range (a NULL key) were not updated
        outside = rows_outside_ranges(session.engine, version.spec)
        if outside is not None:
            status, reason = RunStatus.FAILED, outside
    trigger = None if report.trigger is None else trigger_text(report.trigger)
    ctx.state.finish_run(run_id, status, reason, stamp(ctx.clock), trigger)
    notes = announce(
        ctx,
        run_id,
        [
            Published(
                plan.model,
                f"v{version.seq}",
                status is RunStatus.FAILED,
                reason,
                stopped=status is RunStatus.STOPPED,
            )
        ],
    )
    return Result(run_id, plan, status, report, reason, tuple(notes))


def earlier_starts(
    ctx: Context, run_id: str, plan: BackfillPlan, timer: Timer
) -> tuple[float, ...]:
    """The run's recorded batch starts inside the rate's window, on `timer`'s clock: a resume
    honours the window its earlier batches opened. The real wall clock, not `--as-of`: the
    attempts were stamped at real instants unless `--as-of` fixed them, and fixed stamps are
    then outside the window or after now, and ignored."""
    if plan.rate_per_minute is None:
        return ()
    started = [
        datetime.fromisoformat(a.started_at)
        for a in ctx.state.attempts_of_run(run_id)
        if a.started_at
    ]
    return carried_starts(started, SystemClock().now(), timer.monotonic(), plan.rate_per_minute)


def record_adjustment(ctx: Context, run_id: str, model: str, adjustment: Adjustment) -> None:
    """Record a change of the adaptive throttle with the run: users see why it slowed down."""
    ctx.state.record_event(
        Event(
            kind=THROTTLE_EVENT,
            actor=ctx.actor,
            at=stamp(ctx.clock),
            model=model,
            run_id=run_id,
            reason=adjustment.reason,
            detail={
                "batch": adjustment.batch,
                "latency_seconds": round(adjustment.latency_seconds, 3),
                "bound_seconds": adjustment.bound_seconds,
                "rate_before": adjustment.rate_before,
                "rate_after": adjustment.rate_after,
            },
        )
    )


def held_back(ctx: Context, plan: BackfillPlan, force_paused: bool = False) -> str | None:
    """Why an operator's later decision holds this backfill back: its model was paused, or its
    version was rolled back. (A newer deploy does not: a backfill keeps its recorded version.)"""
    state = ctx.state.model_state(plan.model)
    if state is not None and state.paused and not force_paused:
        return f"{plan.model} is paused"
    if state is not None and state.active_version != plan.version_id:
        rolled_back = any(
            e.kind == "rollback" and (e.detail or {}).get("previous") == plan.version_id
            for e in ctx.state.events(plan.model)
        )
        if rolled_back:
            return f"{plan.model} was rolled back from the version this backfill writes"
    return None


def trigger_text(trigger: Trigger) -> str:
    return f"{trigger.name} at {trigger.partition}: {trigger.detail}"


def verdict(
    report: Report, command: str = KIND, run_id: str | None = None
) -> tuple[RunStatus, str | None]:
    """How a run of `command` (backfill, recover) ended, and why."""
    if report.trigger is not None:
        reason = f"stop-loss {trigger_text(report.trigger)}"
        if report.trigger.name == "check_failure" and run_id is not None:
            # resuming alone would fail the same check on the same rows
            reason += f"; fix the input, then: tidegate rerun {run_id}"
        return RunStatus.FAILED, reason
    if report.stopped:
        return RunStatus.STOPPED, f"stopped on request; resume with `tidegate {command} resume`"
    if report.refusal is not None:
        # resuming alone would refuse them again: the upstream must be republished first
        return RunStatus.FAILED, (
            f"{report.failed} partition(s) failed, {report.skipped} skipped; {report.refusal}"
        )
    if report.failed or report.skipped:
        return RunStatus.FAILED, (
            f"{report.failed} partition(s) failed, {report.skipped} skipped; resume retries them"
        )
    return RunStatus.SUCCEEDED, None


def run_of(ctx: Context, run_id: str, kind: str = KIND) -> Run:
    """The run `run_id` of `kind` (backfill, recover), or a usage error."""
    if not looks_like_run_id(run_id):
        raise UsageError(f"{run_id!r} is not a run id (run-…)")
    run = ctx.state.get_run(run_id)
    if run is None or run.kind != kind:
        raise UsageError(f"no {kind} {run_id}")
    return run


def already_succeeded(ctx: Context, run_id: str, kind: str = KIND) -> Run | None:
    """The run, when it succeeded already: resuming it is then a no-op, not an error, so that
    retry loops and orchestrators may call resume again safely. Reads only the ledger."""
    run = run_of(ctx, run_id, kind)
    return run if run.status is RunStatus.SUCCEEDED else None


def nothing_to_resume(run: Run) -> str:
    return f"nothing to resume: {run.run_id} succeeded at {run.ended_at}"


def resumable(ctx: Context, run_id: str, kind: str = KIND) -> Run:
    """A run of `kind` that may resume: neither done nor running (read inside the writer
    session, after it reconciled a dead writer)."""
    run = run_of(ctx, run_id, kind)
    if run.status is RunStatus.SUCCEEDED:
        raise UsageError(f"{kind} {run_id} already succeeded; nothing to resume")
    if run.status is RunStatus.RUNNING:
        raise UsageError(f"{kind} {run_id} is running")
    return run


def stop(ctx: Context, run_id: str, kind: str = KIND) -> Run:
    """Ask a running backfill or recovery to stop after its in-flight batches (writes only the
    ledger)."""
    run = run_of(ctx, run_id, kind)
    if run.status is not RunStatus.RUNNING:
        raise UsageError(f"{kind} {run_id} is not running (it is {run.status.value})")
    ctx.state.request_stop(run_id, stamp(ctx.clock))
    if run.distributed:
        from tidegate.ops.distributed import close_if_over

        close_if_over(ctx, run_id)  # with no batch in flight, no worker is left to close it
    return run


def runs(ctx: Context) -> list[Run]:
    ctx.project  # noqa: B018 - a project must be there, even to list
    return ctx.state.runs(kind=KIND)


def _missing(key: str, plan_file: str | None) -> str:
    """What a request without `key` lacks, with an example of it (flags, or a plan's keys)."""
    days = example_range(Grain.DAY)
    every = "every partition of a key-list, key-range, cursor or whole-table model"
    if plan_file is not None:
        example = (
            f'partitions = "{days}" (or "all": {every})'
            if key == "partitions"
            else 'model = "MODEL"'
        )
        return f"{plan_file}: {key} is required, e.g. {example}"
    if key == "model":
        return f"backfill needs a MODEL: tidegate backfill MODEL --partitions {days}"
    return f"backfill needs --partitions, e.g. --partitions {days}, or --partitions all ({every})"


def read_plan_file(path: Path) -> tuple[dict[str, Any], str]:
    """The parameters of a reviewed plan file and its exact text (stored with the run)."""
    if not path.is_file():
        raise UsageError(f"plan file {path} does not exist")
    try:
        text = path.read_bytes().decode("utf-8")  # as on disk: no newline translation
    except UnicodeDecodeError as error:
        raise UsageError(f"plan file {path} is not UTF-8: {error}") from None
    try:
        return toml_errors.loads(text), text
    except toml_errors.TOMLDecodeError as error:
        raise ConfigError(
            str(path), toml_errors.decode_message(error), toml_errors.decode_line(error)
        ) from None


def request_from(values: dict[str, Any], plan_file: str | None, plan_text: str | None) -> Request:
    """A Request from flag values or a plan file's keys; unknown keys are refused."""
    known = {
        "model",
        "partitions",
        "batch_size",
        "max_concurrency",
        "rate",
        "max_failures",
        "max_failure_ratio",
        "max_source_rows",
        "max_wall_seconds",
        "stale_only",
        "halt_on_check_failure",
        "halt_on_reconciliation_mismatch",
        "lock_timeout",
        "statement_timeout",
        "max_batch_latency",
    }
    unknown = sorted(set(values) - known)
    if unknown:
        raise UsageError(f"{plan_file or 'backfill'}: unknown key(s) {', '.join(unknown)}")
    for required in ("model", "partitions"):
        if not values.get(required):
            raise UsageError(_missing(required, plan_file))
    # a failure budget means "tolerate failures up to it": a failed check then no longer halts
    budget = values.get("max_failures") is not None or values.get("max_failure_ratio") is not None
    try:
        return Request(
            model=str(values["model"]),
            partitions=str(values["partitions"]),
            batch_size=_count(values, "batch_size"),
            max_concurrency=_count(values, "max_concurrency"),
            rate=values.get("rate"),
            stop_loss=StopLoss(
                max_failures=values.get("max_failures"),
                max_failure_ratio=values.get("max_failure_ratio"),
                max_source_rows=values.get("max_source_rows"),
                max_wall_seconds=values.get("max_wall_seconds"),
                halt_on_check_failure=bool(values.get("halt_on_check_failure", not budget)),
                halt_on_reconciliation_mismatch=bool(
                    values.get("halt_on_reconciliation_mismatch", True)
                ),
            ),
            stale_only=bool(values.get("stale_only", False)),
            lock_timeout=values.get("lock_timeout"),
            statement_timeout=values.get("statement_timeout"),
            max_batch_latency=values.get("max_batch_latency"),
            plan_file=plan_file,
            plan_text=plan_text,
        )
    except (TypeError, ValueError) as error:
        raise UsageError(f"{plan_file or 'backfill'}: {error}") from None


def _count(values: dict[str, Any], key: str) -> int:
    return int(values[key]) if values.get(key) is not None else 1


def _published_once(ctx: Context, spec: ModelSpec, start: int, end: int) -> IntervalSet:
    """The published partitions in [start, end) a backfill must leave alone: an append without
    a unique key writes a partition once (again would duplicate its rows)."""
    if spec.write_mode is not WriteMode.APPEND or spec.unique_key:
        return IntervalSet()
    return IntervalSet.of(ctx.state.published_intervals(spec.name, start, end))


def blast_radius(ctx: Context, plan: BackfillPlan) -> dict[str, Any]:
    """What a backfill would do, without writing anything (the warehouse is opened read-only)."""
    spec = ctx.project.model(plan.model)
    requested = spec.parse_range(plan.requested)
    refused = _published_once(ctx, spec, requested.start, requested.end)
    ranges = plan.ranges()
    batches = plan.batches()
    shown = [next(batches, None) for _ in range(10)]
    source_rows: dict[str, int] = {}
    if not spec.keys and spec.sources:
        engine = open_engine(ctx.project, ctx.wait, read_only=True)
        try:
            for name in spec.sources:
                source = ctx.project.sources[name]
                # a count per range: the dry run needs no fingerprints of the rows
                source_rows[name] = sum(
                    engine.count_in_window(
                        source.table, source.time_column, window_bounds(r.start, r.end)
                    )
                    for r in ranges
                )
        finally:
            engine.close()
    per_partition = ctx.state.mean_publish_seconds(plan.model)
    batch_count = plan.batch_count()
    estimate = (
        None if per_partition is None else per_partition * plan.partitions / plan.max_concurrency
    )
    if plan.rate_per_minute is not None:
        # the throttle alone takes this long: a batch starts at most rate times a minute
        paced = (batch_count - 1) * 60 / plan.rate_per_minute
        estimate = max(estimate or 0.0, paced)
    # an update model's table: its rows per chunk, counted (the source rows of the others)
    update = (
        None
        if spec.update is None
        else key_ranges.chunk_rows(ctx, spec, IntervalSet(plan.selection))
    )
    return {
        "partitions": plan.partitions,
        "batches": batch_count,
        "ranges": [r.label(spec.keys) for r in ranges],
        "first_batches": [b.label(spec.keys) for b in shown if b is not None],
        "source_rows": source_rows,
        "downstream": downstream_of(
            {n: m.upstream for n, m in ctx.project.models.items()}, plan.model
        ),
        "refused": [r.label(spec.keys) for r in refused.ranges(plan.grain, plan.chunk_size)],
        "estimated_seconds": None if estimate is None else round(estimate, 1),
        "update": update,
    }
