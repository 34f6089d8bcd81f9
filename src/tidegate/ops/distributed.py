"""Distributed backfills (docs/design.md §7): `backfill --distributed` queues a run's batches in the
shared ledger and watches them; `tidegate worker` processes, on any machines that reach the ledger
and the warehouse, claim batches through leases and run them.

A worker heartbeats while it holds a batch; one that dies loses the lease when it expires (by
the ledger's clock) and another reclaims the batch: it raises the batch's fence in the
warehouse first, so the dead or paused holder can no longer publish, then settles what the
holder left from the commit markers, and computes the rest. Throttle, stop, stop-loss and
resume work on the run as a whole, across every worker; whichever worker sees the run over
closes it (exactly one does).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from tidegate.domain.attempt import RunStatus
from tidegate.domain.backfill import BackfillPlan, Trigger, fired
from tidegate.domain.clock import Timer, stamp
from tidegate.domain.errors import (
    BusyError,
    FencedError,
    RefusedError,
    TidegateError,
    UsageError,
)
from tidegate.domain.ids import new_run_id
from tidegate.domain.model import ModelSpec
from tidegate.domain.partitions import Grain, IntervalSet, PartitionKey, PartitionRange
from tidegate.domain.queue import BatchTally, HeldError, Lease, RunTally
from tidegate.domain.run import Attempt, Run
from tidegate.engines.base import Fence
from tidegate.engines.factory import SHARED_HINT, open_engine, shares_writes, tell
from tidegate.execution.executor import NO_STOP_LOSS, Executor, Options, Outcome, Report
from tidegate.execution.programs import ProjectStager
from tidegate.execution.reconcile import settle_left
from tidegate.execution.upstream_marks import run_refusal
from tidegate.ops import backfill
from tidegate.ops.announce import Published, announce, announce_start
from tidegate.ops.context import Context
from tidegate.state.base import StateStore

# how often the coordinator reads the run's progress from the ledger
WATCH_SECONDS = 0.5
# how long a queued run waits for a worker's first claim before the coordinator says that no
# worker took it: a forgotten `tidegate worker` is the likely cause, and silence hides it
UNCLAIMED_SECONDS = 30.0
UNCLAIMED_ENV = "TIDEGATE_UNCLAIMED_SECONDS"  # shortens the wait where it is under test


def unclaimed_seconds() -> float:
    return float(os.environ.get(UNCLAIMED_ENV) or UNCLAIMED_SECONDS)


@dataclass(frozen=True)
class WorkerOptions:
    name: str
    lease_seconds: float
    poll_seconds: float = 1.0
    # exit once no distributed run is live (instead of waiting for the next one)
    exit_when_idle: bool = False
    max_batches: int | None = None

    @property
    def lease_ms(self) -> int:
        return max(1, round(self.lease_seconds * 1000))


# (batches queued, seconds waited for a first claim, the threshold it passed)
Unclaimed = Callable[[int, float, float], None]


def default_worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# the coordinator ---------------------------------------------------------------------------


def start(
    ctx: Context,
    request: backfill.Request,
    stop_flag: threading.Event,
    on_outcome: Callable[[Outcome], None],
    on_start: Callable[[str, BackfillPlan], None],
    timer: Timer,
    on_unclaimed: Unclaimed | None = None,
) -> backfill.Result:
    """Queue a backfill's batches for workers and watch it to its end."""
    if ctx.project.model(request.model).update is not None:
        raise UsageError(
            f"{request.model} is an update model: --distributed does not run those yet; "
            "backfill it from one process"
        )
    if not shares_writes(ctx.project):
        raise UsageError(SHARED_HINT)
    plan = backfill.make_plan(ctx, request)
    backfill.refuse_empty(plan, request)
    version = ctx.state.get_version(plan.version_id)
    # a check against the previous partition reads what the batch before published
    limit = 1 if version is not None and version.spec.judged_against_previous else None
    run = Run(
        run_id=new_run_id(),
        kind=backfill.KIND,
        models=(plan.model,),
        partitions=plan.requested,
        requester=ctx.actor,
        status=RunStatus.RUNNING,
        started_at=stamp(ctx.clock),
        params={
            "plan_file": request.plan_file,
            "plan_text": request.plan_text,
            # workers hold a paused model's batches back unless the run was started with --force
            "force_paused": request.force_paused,
        },
        pid=os.getpid(),
        plan=plan.to_json(),
        plan_hash=backfill.plan_hash(request),
        distributed=True,
    )
    batches = ((i, b.start, b.end) for i, b in enumerate(plan.batches()))
    _while_held(
        ctx,
        plan,
        timer,
        lambda: ctx.state.create_distributed_run(
            run, limit or plan.max_concurrency, plan.rate_per_minute, plan.selection, batches
        ),
    )
    announce_start(ctx, run.run_id, [plan.model])
    on_start(run.run_id, plan)
    return watch(ctx, run.run_id, plan, stop_flag, on_outcome, timer, on_unclaimed)


def resume(
    ctx: Context,
    run: Run,
    stop_flag: threading.Event,
    on_outcome: Callable[[Outcome], None],
    on_start: Callable[[str, BackfillPlan], None],
    timer: Timer,
    on_unclaimed: Unclaimed | None = None,
) -> backfill.Result:
    """Queue again what a distributed run has not done, with its recorded plan, and watch."""
    if run.status is RunStatus.SUCCEEDED:
        raise UsageError(f"backfill {run.run_id} already succeeded; nothing to resume")
    if run.status is RunStatus.RUNNING:
        raise UsageError(f"backfill {run.run_id} is running")
    plan = BackfillPlan.from_json(run.plan or "")
    held = backfill.held_back(ctx, plan, bool(run.params.get("force_paused")))
    if held is not None:
        raise RefusedError(f"backfill {run.run_id} cannot resume: {held}")
    _while_held(
        ctx,
        plan,
        timer,
        lambda: ctx.state.reopen_distributed_run(
            run.run_id, os.getpid(), plan.selection, stamp(ctx.clock)
        ),
    )
    on_start(run.run_id, plan)
    return watch(ctx, run.run_id, plan, stop_flag, on_outcome, timer, on_unclaimed)


def _while_held(ctx: Context, plan: BackfillPlan, timer: Timer, queue: Callable[[], None]) -> None:
    """Queue, or when another live run holds a partition of the plan: exit 4, or with --wait
    try again until it is free."""
    spec = ctx.project.model(plan.model)
    told = False
    while True:
        try:
            queue()
            return
        except HeldError as held:
            where = IntervalSet.of([(held.start, held.end)]).ranges(plan.grain, plan.chunk_size)[0]
            message = (
                f"partitions {where.label(spec.keys)} of {plan.model} are held by distributed "
                f"backfill {held.run_id}"
            )
            if not ctx.wait:
                raise BusyError(f"{message}; wait for it, stop it, or pass --wait") from None
            if not told:
                tell(f"waiting: {message}")
                told = True
            timer.sleep(WATCH_SECONDS)


def watch(
    ctx: Context,
    run_id: str,
    plan: BackfillPlan,
    stop_flag: threading.Event,
    on_outcome: Callable[[Outcome], None],
    timer: Timer,
    on_unclaimed: Unclaimed | None = None,
) -> backfill.Result:
    """Show a distributed run's outcomes as workers record them until the run is over. A stop
    (Ctrl-C) is asked of the workers through the ledger; a second Ctrl-C leaves the run to them.
    `on_unclaimed` hears of a wait for the first claim longer than unclaimed_seconds(), on each
    look at the ledger until a worker claims a batch."""
    spec = ctx.project.model(plan.model)
    feed = _Feed(ctx, run_id, spec.keys)
    asked = False
    threshold = unclaimed_seconds()
    began = timer.monotonic()
    # a resumed run has the claims of its earlier life: only a new one ends the wait
    claims_before = len(ctx.state.batch_claims(run_id)) if on_unclaimed else 0
    claimed = on_unclaimed is None
    while True:
        for outcome in feed.new():
            on_outcome(outcome)
        if not claimed and on_unclaimed is not None:
            claimed = len(ctx.state.batch_claims(run_id)) > claims_before
            waited = timer.monotonic() - began
            if not claimed and waited >= threshold:
                on_unclaimed(ctx.state.run_tally(run_id).queued, waited, threshold)
        if stop_flag.is_set() and not asked:
            ctx.state.request_stop(run_id, stamp(ctx.clock))
            asked = True
        current = ctx.state.get_run(run_id)
        if current is None or current.status is not RunStatus.RUNNING:
            break
        close_if_over(ctx, run_id)  # no worker may be left to see it over
        timer.sleep(WATCH_SECONDS)
    for outcome in feed.new():
        on_outcome(outcome)
    return result_of(ctx, run_id, plan)


class _Feed:
    """Outcomes of a run's attempts as they end, each once (memory: the attempts that ended in
    the newest instant)."""

    def __init__(self, ctx: Context, run_id: str, keys: tuple[str, ...]) -> None:
        self.ctx, self.run_id, self.keys = ctx, run_id, keys
        self.since: str | None = None
        self.seen: set[str] = set()

    def new(self) -> list[Outcome]:
        found = [
            a
            for a in self.ctx.state.ended_attempts(self.run_id, self.since)
            if a.attempt_id not in self.seen
        ]
        if found:
            newest = found[-1].ended_at
            if newest != self.since:
                self.seen = set()
            self.since = newest
            self.seen |= {a.attempt_id for a in found if a.ended_at == newest}
        return [_outcome(a, self.keys) for a in found]


def _outcome(attempt: Attempt, keys: tuple[str, ...]) -> Outcome:
    partition = PartitionKey(Grain(attempt.grain), attempt.partition_start, attempt.partition_end)
    return Outcome(
        attempt.model,
        partition,
        partition.label(keys),
        attempt.attempt_id,
        attempt.state,
        attempt.rows,
        attempt.checksum,
        attempt.error,
    )


def result_of(ctx: Context, run_id: str, plan: BackfillPlan) -> backfill.Result:
    run = ctx.state.get_run(run_id)
    if run is None:
        raise UsageError(f"no backfill {run_id}")
    report = _report(ctx.state.run_tally(run_id), ctx.state.run_halt(run_id), run, ctx)
    return backfill.Result(run_id, plan, run.status, report, run.reason)


def _report(tally: RunTally, halt: str | None, run: Run, ctx: Context) -> Report:
    done = tally.done
    return Report(
        published=done.published,
        failed=done.failed,
        skipped=done.skipped,
        rows=done.rows,
        progress=done.progress(_elapsed(run, ctx)),
        trigger=None if halt is None else Trigger(**json.loads(halt)),
        stopped=run.stop_requested_at is not None,
        refusal=run_refusal(ctx.state, run.run_id, ctx.project.model),
    )


def _elapsed(run: Run, ctx: Context) -> float:
    return (ctx.clock.now() - datetime.fromisoformat(run.started_at)).total_seconds()


def close_if_over(ctx: Context, run_id: str) -> bool:
    """Close a live distributed run whose batches are all done, or that may start none (a
    stop, a stop-loss) and has none in flight; announce it. True for the caller that closed it."""
    run = ctx.state.get_run(run_id)
    if run is None or run.status is not RunStatus.RUNNING or not run.distributed:
        return False
    halt = ctx.state.run_halt(run_id)
    tally = ctx.state.run_tally(run_id)
    if not tally.over(halted=halt is not None or run.stop_requested_at is not None):
        return False
    report = _report(tally, halt, run, ctx)
    status, reason = backfill.verdict(report, run_id=run_id)
    trigger = None if report.trigger is None else backfill.trigger_text(report.trigger)
    if not ctx.state.close_distributed_run(run_id, status.value, reason, stamp(ctx.clock), trigger):
        return False
    plan = BackfillPlan.from_json(run.plan or "")
    version = ctx.state.get_version(plan.version_id)
    seq = f"v{version.seq}" if version is not None else plan.version_id
    stopped = status is RunStatus.STOPPED
    announce(ctx, run_id, [Published(plan.model, seq, status is RunStatus.FAILED, reason, stopped)])
    return True


# the worker --------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerEvent:
    """What a worker tells of its work (one line, or one JSON object with --json)."""

    event: str  # claimed, settled, lost, released, closed
    run_id: str
    batch: int | None = None
    token: int | None = None
    detail: str | None = None
    tally: BatchTally | None = None


def work(
    ctx: Context,
    options: WorkerOptions,
    stop_flag: threading.Event,
    tell: Callable[[WorkerEvent], None],
    timer: Timer,
) -> int:
    """Claim and run batches of distributed runs until stopped (or idle, or `max_batches`
    ran); returns how many batches this worker settled."""
    engine = open_engine(ctx.project, ctx.wait, lease_seconds=options.lease_seconds)
    settled = 0
    secrets = ctx.project.secrets()
    # one executor for every batch: its handles keep the statements they built
    executor = Executor(
        engine,
        ctx.state,
        ctx.clock,
        timer,
        ctx.project.sources,
        _active_spec(ctx),
        ctx.project.settings.taint.downstream,
        # jobs of command models run on this machine, recorded with their attempts
        ProjectStager(ctx.project.root, ctx.state, ctx.clock, timer, secrets),
        staging_prefix=f"w{uuid.uuid4().hex[:6]}_",
        keep_handles=True,
        secrets=secrets,
    )
    try:
        engine.prepare()
        while not stop_flag.is_set():
            lease = ctx.state.claim_batch(options.name, options.lease_ms)
            if lease is None:
                live = [r.run_id for r in ctx.state.live_runs() if r.distributed]
                for run_id in live:
                    if close_if_over(ctx, run_id):
                        tell(WorkerEvent("closed", run_id))
                if options.exit_when_idle and not live:
                    break
                timer.sleep(options.poll_seconds)
                continue
            tell(WorkerEvent("claimed", lease.run_id, lease.batch, lease.token))
            if _run_batch(ctx, executor, lease, options, tell):
                settled += 1
            if close_if_over(ctx, lease.run_id):
                tell(WorkerEvent("closed", lease.run_id))
            if options.max_batches is not None and settled >= options.max_batches:
                break
    finally:
        executor.close()
        engine.close()
    return settled


def _run_batch(
    ctx: Context,
    executor: Executor,
    lease: Lease,
    options: WorkerOptions,
    tell: Callable[[WorkerEvent], None],
) -> bool:
    """Run one leased batch: fence its partitions, settle what an earlier holder left, compute
    and publish the rest, then settle the batch with the stop-loss it fires. False when the
    lease was lost on the way (nothing of this worker's is checkpointed then)."""
    state, clock, engine = ctx.state, ctx.clock, executor.engine
    run = state.get_run(lease.run_id)
    plan = BackfillPlan.from_json(run.plan or "") if run is not None else None
    version = state.get_version(plan.version_id) if plan is not None else None
    if run is None or plan is None or version is None:
        state.release_batch(lease)
        return False
    held = backfill.held_back(ctx, plan, bool(run.params.get("force_paused")))
    if held is not None:
        # the model was paused or rolled back since: the run stops, as on one machine
        state.request_stop(run.run_id, stamp(clock))
        state.release_batch(lease)
        tell(WorkerEvent("released", lease.run_id, lease.batch, lease.token, held))
        return False
    window = PartitionRange(plan.grain, lease.start, lease.end, plan.chunk_size)
    fence = Fence(tuple(f"{lease.model}/{p.start}" for p in window), lease.token)
    lost = threading.Event()

    def still_held() -> bool:
        if lost.is_set() or not state.renew_lease(lease, options.lease_ms):
            lost.set()
        return not lost.is_set()

    error: str | None = None
    report = Report()
    with _Heartbeat(state, lease, options, lost):
        try:
            engine.raise_fence(fence)
            settle_left(
                engine, state, clock, state.live_attempts_of_batch(lease.run_id, lease.batch)
            )
            done = IntervalSet.of(state.run_checkpoints(lease.run_id, lease.model))
            todo = (
                IntervalSet.of([(lease.start, lease.end)])
                .minus(done)
                .ranges(plan.grain, plan.chunk_size)
            )
            report = executor.execute(
                lease.run_id,
                version,
                [(lease.batch, part) for part in todo],
                Options(
                    stop_loss=NO_STOP_LOSS,
                    stop_requested=lost.is_set,
                    fence=fence,
                    lease_held=still_held,
                ),
            )
        except FencedError as fenced:
            _drop_own_staging(executor)
            tell(WorkerEvent("lost", lease.run_id, lease.batch, lease.token, str(fenced)))
            return False
        except Exception as failure:
            _drop_own_staging(executor)
            if not still_held():
                # taken over while this worker ran it: the new holder settles its attempts
                tell(WorkerEvent("lost", lease.run_id, lease.batch, lease.token, str(failure)))
                return False
            # a batch that cannot run fails its partitions, rather than every worker in turn
            error = f"{type(failure).__name__}: {failure}"
            settle_left(
                engine, state, clock, state.live_attempts_of_batch(lease.run_id, lease.batch)
            )
    tally = _tally_of(state, lease, window, report)
    halt = _judge(ctx, run, plan, lease, tally)
    if not state.settle_batch(lease, tally, halt):
        tell(WorkerEvent("lost", lease.run_id, lease.batch, lease.token, "lease expired"))
        return False
    tell(WorkerEvent("settled", lease.run_id, lease.batch, lease.token, error, tally))
    return True


def _tally_of(
    state: StateStore, lease: Lease, window: PartitionRange, report: Report
) -> BatchTally:
    """What the batch did, from the ledger (whichever workers did it): a partition neither
    published nor skipped counts as failed. Reads and check outcomes are this worker's."""
    outcome = state.batch_outcome(lease.run_id, lease.batch)
    published, rows = outcome.get("published", (0, 0))
    skipped = outcome.get("skipped", (0, 0))[0]
    return BatchTally(
        published=published,
        failed=len(window) - published - skipped,
        skipped=skipped,
        rows=rows,
        source_rows=report.progress.source_rows,
        check_failures=report.progress.check_failures,
        mismatches=report.progress.reconciliation_mismatches,
    )


def _judge(
    ctx: Context, run: Run, plan: BackfillPlan, lease: Lease, batch: BatchTally
) -> str | None:
    """The stop-loss the run fires with this batch, over every worker's batches since the run
    started or was last resumed (as on one machine, a resumed run judges what it does from
    there); None when none fires."""
    began, since = run.started_at, BatchTally()
    resumed = ctx.state.run_resumed(run.run_id)
    if resumed is not None:
        began, since = resumed
    # the batches settled before this one, this one, less what the run had done at its resume
    done = ctx.state.run_tally(run.run_id).done.plus(batch).minus(since)
    progress = done.progress((ctx.clock.now() - datetime.fromisoformat(began)).total_seconds())
    spec = ctx.project.model(plan.model)
    label = PartitionRange(plan.grain, lease.start, lease.end, plan.chunk_size).label(spec.keys)
    trigger = fired(plan.stop_loss, progress, label.split("..")[-1])
    if trigger is None:
        return None
    halt = {"name": trigger.name, "detail": trigger.detail, "partition": trigger.partition}
    return json.dumps(halt, sort_keys=True)


def _active_spec(ctx: Context) -> Callable[[str], ModelSpec]:
    def spec(model: str) -> ModelSpec:
        version = ctx.state.active_version(model)
        if version is None:
            raise UsageError(f"model {model!r} has no active version; run `tidegate deploy`")
        return version.spec

    return spec


def _drop_own_staging(executor: Executor) -> None:
    for name in executor.engine.staging_tables():
        if name.startswith(executor.staging_prefix):
            executor.engine.drop_staging(name)


class _Heartbeat:
    """Renews a lease every third of its life while the batch runs; sets `lost` when the
    ledger says the lease is no longer this worker's."""

    def __init__(
        self, state: StateStore, lease: Lease, options: WorkerOptions, lost: threading.Event
    ) -> None:
        self.state = state
        self.lease, self.options, self.lost = lease, options, lost
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="tidegate-heartbeat", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.done.set()
        self.thread.join()

    def _beat(self) -> None:
        while not self.done.wait(self.options.lease_seconds / 3):
            try:
                renewed = self.state.renew_lease(self.lease, self.options.lease_ms)
            except TidegateError:
                renewed = False  # the ledger is out of reach: the lease cannot be counted on
            if not renewed:
                self.lost.set()
                return
