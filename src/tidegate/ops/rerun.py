"""Rerun: judge what rerunning a run's partitions would do, then do exactly that, and prove it.

The scope is a run's partitions: those it failed, skipped or never started are selected; those
it published stay untouched. `--partitions` selects a range instead. The judgment (see
domain/rerun.py) is printed before anything is touched; partitions that need approval run only
with `--approve`, refused ones never. After the rerun, a partition whose version and inputs are
unchanged must have the checksum it had before: otherwise the model is not deterministic.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from tidegate.domain.attempt import AttemptState, RunStatus
from tidegate.domain.backfill import BackfillPlan
from tidegate.domain.clock import SystemTimer, stamp
from tidegate.domain.errors import RefusedError, UsageError
from tidegate.domain.ids import looks_like_run_id, new_run_id
from tidegate.domain.model import Version
from tidegate.domain.partitions import IntervalSet, PartitionKey, example_range
from tidegate.domain.rerun import Facts, Judgment, Rules, judge, needs_approval
from tidegate.domain.run import Attempt, Input, PublishedPartition, Run
from tidegate.execution.executor import Options, Outcome
from tidegate.execution.restore import RestoreStager
from tidegate.execution.session import writer_session
from tidegate.ops.announce import Published, announce, announce_start
from tidegate.ops.backfill import refuse_stream
from tidegate.ops.context import Context
from tidegate.ops.deploy import resolve
from tidegate.state.base import Event

KIND = "rerun"
RESTORE_KIND = "restore"
LIVE = frozenset({"pending", "running", "staged", "audited"})


@dataclass(frozen=True)
class Plan:
    of_run: str | None  # None when a model's range is rerun, whichever runs wrote it
    model: str
    version: Version
    judgments: list[Judgment]
    requested: str | None = None  # the range named with the model

    @property
    def scope(self) -> str:
        """What is rerun, in words: the run, or the model's range."""
        return self.of_run or f"{self.model} {self.requested}"

    @property
    def to_run(self) -> list[Judgment]:
        return [j for j in self.judgments if j.runs]


@dataclass(frozen=True)
class Approval:
    by: str
    at: str
    reason: str


@dataclass(frozen=True)
class Proof:
    """A rerun partition that had been published before: did it come out the same?"""

    partition: str
    before: str
    after: str
    same_inputs: bool
    # a restore's: `before` is the earlier attempt's checksum, which `after` must equal
    restored: bool = False

    @property
    def deterministic(self) -> bool | None:
        """None when the inputs changed: nothing to prove."""
        return (self.before == self.after) if self.same_inputs else None


@dataclass(frozen=True)
class Result:
    plan: Plan
    run_id: str
    status: RunStatus
    reason: str | None
    outcomes: tuple[Outcome, ...]
    proofs: tuple[Proof, ...]
    approval: Approval | None
    notes: tuple[str, ...] = ()


def judge_target(
    ctx: Context,
    target: str,
    model: str | None,
    partitions: str | None,
    version_ref: str | None,
) -> Plan:
    """`rerun RUN_ID` or `rerun MODEL --partitions RANGE`: a model name never looks like a run
    id, so the word says which."""
    if looks_like_run_id(target):
        return judge_rerun(ctx, target, model, partitions, version_ref)
    spec = ctx.project.model(target)
    if model is not None:
        raise UsageError(f"--model picks one model of a run; {target!r} is a model: drop --model")
    if partitions is None:
        raise UsageError(
            f"rerun {target} needs the range to rerun, e.g. "
            f"tidegate rerun {target} --partitions {example_range(spec.grain)}"
        )
    return judge_range(ctx, target, partitions, version_ref)


def judge_rerun(
    ctx: Context,
    run_id: str,
    model: str | None,
    partitions: str | None,
    version_ref: str | None,
) -> Plan:
    """The judgment of rerunning a run's partitions: those it did not publish, or the range
    `partitions` of them."""
    if not looks_like_run_id(run_id):
        raise UsageError(f"{run_id!r} is not a run id (run-…)")
    run = ctx.state.get_run(run_id)
    if run is None:
        raise UsageError(f"no run {run_id}")
    name = _model_of(run, model)
    version = _version(ctx, name, version_ref)
    spec = version.spec
    attempted: dict[int, Attempt] = {}
    for attempt in ctx.state.attempts_of_run(run_id):
        if attempt.model == name:
            known = attempted.get(attempt.partition_start)
            if known is None or attempt.attempt_id > known.attempt_id:
                attempted[attempt.partition_start] = attempt
    if partitions is not None:
        chosen = spec.parse_range(partitions)
        return _plan(ctx, run_id, name, version, {k.start: k for k in chosen}, lambda *_: True)
    scope = {k.start: k for k in _planned(run, version)}
    for start, attempt in attempted.items():
        scope.setdefault(
            start, PartitionKey(spec.grain, attempt.partition_start, attempt.partition_end)
        )

    def unpublished(start: int, row: PublishedPartition | None) -> bool:
        mine = attempted.get(start)
        if mine is not None and mine.state is AttemptState.PUBLISHED:
            return False
        # published by a later run than this one's try: someone already fixed it. (Ids start
        # with their UTC time, so they compare in time order.)
        if row is None or row.attempt_id is None:
            return True
        if mine is not None:
            return not row.attempt_id > mine.attempt_id
        return not (row.run_id or "") > run_id

    return _plan(ctx, run_id, name, version, scope, unpublished)


def judge_range(ctx: Context, model: str, partitions: str, version_ref: str | None) -> Plan:
    """The judgment of rerunning the range `partitions` of `model`, whichever runs wrote it:
    every partition of the range is selected, and judged as a run's would be."""
    version = _version(ctx, model, version_ref)
    chosen = version.spec.parse_range(partitions)
    scope = {k.start: k for k in chosen}
    return _plan(ctx, None, model, version, scope, lambda *_: True, chosen.label(version.spec.keys))


def _version(ctx: Context, name: str, version_ref: str | None) -> Version:
    ctx.project.model(name)
    version = resolve(ctx, name, version_ref) if version_ref else ctx.state.active_version(name)
    if version is None:
        raise UsageError(f"model {name!r} has no active version; run `tidegate deploy {name}`")
    refuse_stream(version, "rerun")
    return version


def _plan(
    ctx: Context,
    of_run: str | None,
    name: str,
    version: Version,
    scope: dict[int, PartitionKey],
    selected: Callable[[int, PublishedPartition | None], bool],
    requested: str | None = None,
) -> Plan:
    """Judge each partition of `scope`, those `selected` (by start and ledger row) to rerun."""
    spec = version.spec
    # a run marked running whose process is gone holds nothing: the next writer settles it
    live_runs = {r.run_id for r in ctx.state.live_runs() if _alive(r.pid)}
    first, last = (min(scope), max(k.end for k in scope.values())) if scope else (0, 0)
    read_by = _read_by(ctx, name, first, last)
    tainted = {t.mark.start: t.reason for t in ctx.state.open_taints(name, first, last)}
    facts = []
    for start in sorted(scope):
        key = scope[start]
        row = ctx.state.partition(name, start)
        live = row is not None and row.last_state.value in LIVE
        holder = ctx.state.get_attempt(row.last_attempt_id) if live and row else None
        facts.append(
            Facts(
                label=key.label(spec.keys),
                start=start,
                end=key.end,
                selected=selected(start, row),
                state=row.last_state.value if row else None,
                writer_version=row.version_id if row and row.attempt_id else None,
                writer_run=row.run_id if row else None,
                published_at=row.published_at if row else None,
                locked_by=holder.run_id if holder and holder.run_id in live_runs else None,
                read_by=tuple(read_by.get(start, ())),
                taint=tainted.get(start),
            )
        )
    rules = Rules(
        target_version=version.version_id,
        write_mode=spec.write_mode.value,
        unique_key=spec.unique_key,
        max_partitions=ctx.project.settings.rerun.max_partitions,
        approve_consumed=ctx.project.settings.rerun.approve_consumed,
    )
    return Plan(of_run, name, version, judge(facts, rules), requested)


FILE_KEYS = frozenset({"run_id", "model", "partitions", "version", "approve", "approver"})


def from_file(values: dict[str, Any], path: str) -> dict[str, str | None]:
    """A reviewed rerun plan (the runbook, kept in git): its keys, all text. `target` is what
    `rerun` is given: the run, or (without one) the model."""
    unknown = sorted(set(values) - FILE_KEYS)
    if unknown:
        raise UsageError(
            f"{path}: unknown key {unknown[0]!r} (a rerun plan has {', '.join(sorted(FILE_KEYS))})"
        )
    wrong = sorted(k for k, v in values.items() if not isinstance(v, str))
    if wrong:
        raise UsageError(f"{path}: {wrong[0]} must be text")
    if "run_id" not in values and "model" not in values:
        raise UsageError(f"{path}: a rerun plan names its run_id, or a model and its partitions")
    planned = {k: values.get(k) for k in FILE_KEYS}
    return {**planned, "target": planned["run_id"] or planned["model"]}


def rerun(
    ctx: Context,
    plan: Plan,
    approve: str | None,
    plan_file: str | None = None,
    plan_text: str | None = None,
    restoring: Mapping[int, Attempt] | None = None,
) -> Result:
    """Execute the plan's safe partitions, and those needing approval when `approve` gives
    the reason; record the judgment and the approval with the run; prove idempotency.

    `restoring` (partition start → an earlier attempt): publish again what those attempts
    published, read from the files they wrote, each replacing its partition whole; the proof is
    then that each partition's checksum is the earlier attempt's."""
    waiting = needs_approval(plan.judgments)
    if waiting and not approve:
        labels = ", ".join(j.facts.label for j in waiting[:5])
        raise RefusedError(
            f"{len(waiting)} partition(s) need approval ({labels}"
            f"{', …' if len(waiting) > 5 else ''}): {waiting[0].reason}; rerun with "
            '--approve "reason"'
        )
    state = ctx.state.model_state(plan.model)
    if state is not None and state.paused:
        raise RefusedError(f"model {plan.model!r} is paused; `tidegate unpause {plan.model}` first")
    to_run = plan.to_run
    if not to_run:
        raise UsageError(
            f"nothing to rerun in {plan.scope}: every partition is untouched or refused"
        )
    approval = Approval(ctx.actor, stamp(ctx.clock), approve) if waiting and approve else None
    before = {j.facts.start: _published(ctx, plan.model, j.facts.start) for j in to_run}
    spec = plan.version.spec
    with writer_session(ctx.project, ctx.state, ctx.clock, ctx.wait) as session:
        session.refuse_unready(plan.version)
        run_id = new_run_id()
        ctx.state.create_run(
            Run(
                run_id=run_id,
                kind=RESTORE_KIND if restoring else KIND,
                models=(plan.model,),
                partitions=f"{len(to_run)} partition(s) of {plan.scope}",
                requester=ctx.actor,
                status=RunStatus.RUNNING,
                started_at=stamp(ctx.clock),
                pid=os.getpid(),
                params={"plan_file": plan_file, "plan_text": plan_text},
                plan=json.dumps(plan_document(plan, approval), sort_keys=True),
                plan_hash=hashlib.sha256(plan_text.encode()).hexdigest() if plan_text else None,
            )
        )
        announce_start(ctx, run_id, [plan.model])
        if approval is not None:
            ctx.state.record_event(
                Event(
                    kind="approval",
                    actor=approval.by,
                    at=approval.at,
                    model=plan.model,
                    version_id=plan.version.version_id,
                    run_id=run_id,
                    reason=approval.reason,
                    detail={
                        "rerun_of": plan.of_run,
                        "partitions": [j.facts.label for j in waiting],
                    },
                )
            )
        outcomes: list[Outcome] = []
        batches = enumerate(spec.span(j.facts.start, j.facts.end) for j in to_run)
        executor = session.executor(SystemTimer())
        if restoring:
            executor = replace(
                executor,
                stager=RestoreStager(restoring),
                inputs_from={start: a.attempt_id for start, a in restoring.items()},
            )
        with ctx.closing_run(run_id):
            executor.execute(
                run_id,
                plan.version,
                batches,
                Options(on_outcome=outcomes.append, rebuild=bool(restoring)),
            )
        proofs = (
            _restored(restoring, outcomes) if restoring else _prove(ctx, plan, before, outcomes)
        )
        for proof in proofs:
            if proof.deterministic is False:
                ctx.state.record_event(
                    Event(
                        kind="nondeterministic",
                        actor=ctx.actor,
                        at=stamp(ctx.clock),
                        model=plan.model,
                        version_id=plan.version.version_id,
                        run_id=run_id,
                        detail={
                            "partition": proof.partition,
                            "before": proof.before,
                            "after": proof.after,
                        },
                    )
                )
        bad = [o for o in outcomes if o.state is not AttemptState.PUBLISHED]
        flaky = [p for p in proofs if p.deterministic is False]
        status = RunStatus.FAILED if bad or flaky else RunStatus.SUCCEEDED
        reason = (
            f"{len(bad)} of {len(outcomes)} partition(s) not published"
            if bad
            else f"not deterministic: {len(flaky)} partition(s) changed on the same inputs"
            if flaky
            else None
        )
        ctx.state.finish_run(run_id, status, reason, stamp(ctx.clock))
    notes = announce(
        ctx,
        run_id,
        [
            Published(
                plan.model,
                f"v{plan.version.seq}",
                status is RunStatus.FAILED,
                reason,
                stopped=status is RunStatus.STOPPED,
            )
        ],
    )
    return Result(
        plan, run_id, status, reason, tuple(outcomes), tuple(proofs), approval, tuple(notes)
    )


def plan_document(plan: Plan, approval: Approval | None) -> dict[str, Any]:
    return {
        "rerun_of": plan.of_run,
        "model": plan.model,
        "version_id": plan.version.version_id,
        "seq": plan.version.seq,
        "write_mode": plan.version.spec.write_mode.value,
        "unique_key": list(plan.version.spec.unique_key),
        "judgment": [
            {
                "partition": j.facts.label,
                "state": j.facts.state,
                "written_by_version": j.facts.writer_version,
                "written_by_run": j.facts.writer_run,
                "published_at": j.facts.published_at,
                "read_by": list(j.facts.read_by),
                "taint": j.facts.taint,
                "verdict": j.verdict.value,
                "reason": j.reason,
            }
            for j in plan.judgments
        ],
        "approval": None
        if approval is None
        else {"by": approval.by, "at": approval.at, "reason": approval.reason},
    }


def _read_by(ctx: Context, model: str, start: int, end: int) -> dict[int, list[str]]:
    """Per published partition of `model` in [start, end): the registered consumers that read
    it, and the downstream model partitions whose published attempt read it."""
    found = ctx.state.consumed(model, start, end)
    published = [p for p in ctx.state.partitions(model, start, end) if p.attempt_id]
    for child in ctx.project.order:
        child_spec = ctx.project.model(child)
        if model not in child_spec.upstream or not published:
            continue
        for read in ctx.state.readers(child, model, [(start, end)]):
            label = PartitionKey(child_spec.grain, read.start, read.end).label(child_spec.keys)
            for partition in published:
                s, e = partition.partition_start, partition.partition_end
                if s < read.read_end and e > read.read_start:
                    found.setdefault(s, []).append(f"{child} {label}")
    return found


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _model_of(run: Run, model: str | None) -> str:
    if model is not None:
        if model not in run.models:
            raise UsageError(f"run {run.run_id} did not write {model!r} ({', '.join(run.models)})")
        return model
    if len(run.models) != 1:
        raise UsageError(
            f"run {run.run_id} wrote {', '.join(run.models) or 'nothing'}; name one with --model"
        )
    return run.models[0]


def _planned(run: Run, version: Version) -> list[PartitionKey]:
    """The partitions the run set out to write (a backfill's plan, or a run's range)."""
    spec = version.spec
    if run.plan and run.kind == "backfill":
        selection = IntervalSet(BackfillPlan.from_json(run.plan).selection)
        return [k for r in selection.ranges(spec.grain, spec.chunk_size) for k in r]
    if run.kind == "run" and run.partitions not in ("due", ""):
        return list(spec.parse_range(run.partitions))
    return []


def _published(ctx: Context, model: str, start: int) -> tuple[str, str, list[Input]] | None:
    """(version, checksum, inputs) of what is published there now."""
    row = ctx.state.partition(model, start)
    if row is None or row.attempt_id is None or row.version_id is None or row.checksum is None:
        return None
    return row.version_id, row.checksum, ctx.state.inputs(row.attempt_id)


def _prove(
    ctx: Context,
    plan: Plan,
    before: dict[int, tuple[str, str, list[Input]] | None],
    outcomes: list[Outcome],
) -> list[Proof]:
    proofs: list[Proof] = []
    if plan.version.spec.update is not None:
        # exempt: the application changes an updated table's rows between two runs; the
        # reconciliation in each range's transaction (no row differs from its expression) is
        # the update's proof instead
        return proofs
    for outcome in outcomes:
        earlier = before.get(outcome.partition.start)
        if earlier is None or outcome.state is not AttemptState.PUBLISHED:
            continue
        version, checksum, inputs = earlier
        if version != plan.version.version_id or outcome.checksum is None:
            continue
        now = ctx.state.inputs(outcome.attempt_id)
        same = _fingerprints(inputs) == _fingerprints(now)
        proofs.append(Proof(outcome.label, checksum, outcome.checksum, same))
    return proofs


def _restored(restoring: Mapping[int, Attempt], outcomes: list[Outcome]) -> list[Proof]:
    """Each restored partition holds what its earlier attempt published."""
    return [
        Proof(o.label, restoring[o.partition.start].checksum or "", o.checksum, True, True)
        for o in outcomes
        if o.state is AttemptState.PUBLISHED and o.checksum is not None
    ]


def _fingerprints(inputs: list[Input]) -> list[tuple[str, str, int, int, str | None]]:
    return sorted((i.upstream, i.kind, i.range_start, i.range_end, i.fingerprint) for i in inputs)
