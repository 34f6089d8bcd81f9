"""Validate: run a version on sample partitions into its shadow table, check, and record a gate.

The shadow table (schema `_tidegate_shadow`, one table per version) is written with the same
write–audit–publish path as a real run, but no reader of published tables looks there and the
ledger's partitions are untouched: validating can never change what readers see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidegate.domain.checks import CheckResult
from tidegate.domain.clock import SystemTimer, stamp
from tidegate.domain.command import job_redactor
from tidegate.domain.errors import UsageError
from tidegate.domain.gate import Gate, inputs_digest, is_flaky, sample
from tidegate.domain.ids import new_gate_id
from tidegate.domain.model import ModelSpec, Version
from tidegate.domain.partitions import (
    EVERYTHING,
    PartitionKey,
    floor,
    to_epoch,
)
from tidegate.domain.reconciliation import ReconciliationResult
from tidegate.engines.base import Engine, Target
from tidegate.execution.executor import reading_of
from tidegate.execution.inputs import read_inputs
from tidegate.execution.session import WriterSession, writer_session
from tidegate.execution.unit import Unit, compute
from tidegate.ops.context import Context
from tidegate.ops.deploy import resolve
from tidegate.ops.diff import diff
from tidegate.ops.status import check_doc, reconciliation_doc
from tidegate.sql.statements import SHADOW_SCHEMA
from tidegate.state.base import Event

DEFAULT_SAMPLE = 5


@dataclass(frozen=True)
class Verdict:
    """What validating one partition found."""

    label: str
    state: str  # passed | failed | skipped
    rows: int | None = None
    checksum: str | None = None
    reason: str | None = None
    checks: tuple[CheckResult, ...] = ()
    reconciliations: tuple[ReconciliationResult, ...] = ()

    def document(self) -> dict[str, Any]:
        return {
            "partition": self.label,
            "state": self.state,
            "rows": self.rows,
            "checksum": self.checksum,
            "reason": self.reason,
            "checks": [check_doc(c) for c in self.checks],
            "reconciliations": [reconciliation_doc(r) for r in self.reconciliations],
        }


def validate(
    ctx: Context,
    model: str,
    ref: str | None,
    sample_size: int | None,
    partitions: str | None,
    seed: int,
) -> Gate:
    version = resolve(ctx, model, ref)
    spec = version.spec
    if spec.update is not None:
        raise UsageError(
            f"{model} is an update model: it writes its table in place, with no shadow table "
            "to validate into; its audit runs in each range's transaction"
        )
    if spec.stream is not None:
        from tidegate.ops.stream_validate import validate_stream

        if partitions is not None or sample_size is not None:
            raise UsageError(f"{model} is a stream: it is validated whole, not by partitions")
        return validate_stream(ctx, version)
    if sample_size is not None and sample_size < 1:
        raise UsageError("--sample must be at least 1")
    chosen = _choose(ctx, spec, partitions, sample_size or DEFAULT_SAMPLE, seed)
    if not chosen:
        raise UsageError(
            f"{model} has no complete partition to validate yet; name some with --partitions"
        )
    gate_id = new_gate_id()
    with writer_session(ctx.project, ctx.state, ctx.clock, ctx.wait) as session:
        verdicts, fingerprints = [], []
        for partition in chosen:
            verdict, read = shadow_run(session, version, partition, gate_id)
            verdicts.append(verdict)
            fingerprints += [(verdict.label, name, fp) for name, fp in read]
    compared = _compare_with_active(ctx, version, [v for v in verdicts if v.rows is not None])
    ran = [v for v in verdicts if v.state != "skipped"]
    passed = bool(ran) and all(v.state == "passed" for v in ran)
    inputs = inputs_digest(fingerprints)
    earlier = ctx.state.gates(model)
    gate = Gate(
        gate_id=gate_id,
        model=model,
        version_id=version.version_id,
        passed=passed,
        flaky=is_flaky(earlier, version.version_id, inputs, passed),
        inputs=inputs,
        partitions=tuple(v.label for v in verdicts),
        report={
            "seq": version.seq,
            "shadow_table": f"{SHADOW_SCHEMA}.{version.shadow_table}",
            "sample": {"size": sample_size, "seed": seed, "requested": partitions},
            "partitions": [v.document() for v in verdicts],
            "summary": _summary(verdicts),
            "diff": compared,
        },
        actor=ctx.actor,
        created_at=stamp(ctx.clock),
    )
    return recorded(ctx, gate)


def recorded(ctx: Context, gate: Gate) -> Gate:
    """Record the gate with its history event (its summary the reason); returns it."""
    ctx.state.record_gate(
        gate,
        Event(
            kind="gate",
            actor=gate.actor,
            at=gate.created_at,
            model=gate.model,
            version_id=gate.version_id,
            reason=gate.report["summary"],
            detail={"gate_id": gate.gate_id, "passed": gate.passed, "flaky": gate.flaky},
        ),
    )
    return gate


def _choose(
    ctx: Context, spec: ModelSpec, partitions: str | None, size: int, seed: int
) -> list[PartitionKey]:
    """The named partitions; otherwise a sample of those the active version published (what
    the new version's output is compared with), or of every complete partition while there are
    none."""
    if partitions is not None:
        chosen = spec.parse_range(partitions)
        first = spec.first_partition()
        if first is not None and chosen.start < first.start:
            raise UsageError(f"{spec.name} starts at {spec.start}; {partitions} is before it")
        return list(chosen)
    if spec.cursor is not None:
        return _published_cursor_partitions(ctx, spec, size, seed)
    complete = spec.all_partitions_until(floor(spec.grain, to_epoch(ctx.clock.now())))
    active = ctx.state.active_version(spec.name)
    published = (
        ctx.state.published_intervals(spec.name, complete.start, complete.end, active.version_id)
        if active
        else []
    )
    candidates = (
        [k.start for s, e in published for k in spec.span(s, e)]
        if published
        else [k.start for k in complete]
    )
    if not candidates:
        return []
    by_start = {k.start: k for k in complete}
    return [by_start[start] for start in sample(candidates, size, seed)]


def _published_cursor_partitions(
    ctx: Context, spec: ModelSpec, size: int, seed: int
) -> list[PartitionKey]:
    """A sample of the intervals the active version of a cursor model published."""
    active = ctx.state.active_version(spec.name)
    if active is None:
        return []
    published = {
        p.partition_start: PartitionKey(spec.grain, p.partition_start, p.partition_end)
        for p in ctx.state.partitions(spec.name, *EVERYTHING)
        if p.attempt_id is not None and p.version_id == active.version_id
    }
    return [published[start] for start in sample(list(published), size, seed)]


def shadow_run(
    session: WriterSession, version: Version, partition: PartitionKey, tag: str
) -> tuple[Verdict, list[tuple[str, str | None]]]:
    """Stage, audit and (unless the contract failed) write one partition into the version's
    shadow table; `tag` (a gate or run id) names the work. Returns the verdict and the
    fingerprints of the inputs it read."""
    spec = version.spec
    label = partition.label(spec.keys)
    engine, sources = session.engine, session.project.sources
    window = spec.span(partition.start, partition.end)
    plan = read_inputs(
        engine, session.state, spec, sources, session.active_spec, window, [partition]
    )
    read = [(i.upstream, i.fingerprint) for i in plan.inputs.get(partition.start, [])]
    if partition.start in plan.missing:
        return Verdict(label, "skipped", reason=plan.missing[partition.start]), read
    unit = Unit.reading(plan, window, (partition,), {partition.start: tag}, 0)
    staging = f"{spec.name}__validate"
    computed = compute(
        engine,
        version,
        unit,
        reading_of(spec, sources, session.active_spec),
        lambda _: None,
        staging,
        # a shadow run has no attempts in the ledger: a job it runs is not recorded
        session.stager(SystemTimer(), record=False),
    )
    checks = tuple(computed.checks.get(partition.start, ()))
    reconciliations = tuple(computed.reconciliations.get(partition.start, ()))
    if computed.error is not None or not computed.checksums:
        engine.drop_staging(staging)
        reason = computed.error or "; ".join(computed.problems(partition.start))
        # the gate's report is kept in the ledger and printed: a model's failure is masked as
        # an attempt's is
        reason = job_redactor(spec.program, session.secrets)(reason)
        return Verdict(label, "failed", reason=reason, checks=checks), read
    _write_shadow(engine, version, staging, unit)
    checksum = computed.checksums[partition.start]
    problems = computed.problems(partition.start)
    return (
        Verdict(
            label,
            "failed" if problems else "passed",
            checksum.rows,
            str(checksum),
            "; ".join(problems) or None,
            checks,
            reconciliations,
        ),
        read,
    )


def _write_shadow(engine: Engine, version: Version, staging: str, unit: Unit) -> None:
    spec = version.spec
    target = Target(
        version.shadow_table,
        spec.columns,
        spec.partition_column,
        spec.single_unit,
        schema=SHADOW_SCHEMA,
        cursor=spec.cursor is not None,
    )
    engine.publish(target, staging, unit.bounds(spec), [])


def _compare_with_active(
    ctx: Context, version: Version, written: list[Verdict]
) -> dict[str, Any] | None:
    """Each validated partition's output against what the active version published there:
    row counts, column sums and NULLs, keys only on one side or changed (see ops/diff.py)."""
    active = ctx.state.active_version(version.model)
    if active is None or active.version_id == version.version_id:
        return None
    partitions = []
    for verdict in written:
        try:
            found = diff(ctx, version.model, active.version_id, version.version_id, verdict.label)
        except UsageError as error:
            partitions.append({"partition": verdict.label, "agree": None, "note": str(error)})
            continue
        partitions.append(
            {"partition": verdict.label, "agree": found["agree"], "summary": found["summary"]}
        )
    return {
        "against": f"v{active.seq}",
        "columns": _columns(active, version),
        "partitions": partitions,
    }


def _columns(left: Version, right: Version) -> dict[str, list[str]]:
    mine = {c.name for c in right.spec.columns}
    theirs = {c.name for c in left.spec.columns}
    return {"only_left": sorted(theirs - mine), "only_right": sorted(mine - theirs)}


def _summary(verdicts: list[Verdict]) -> str:
    counts = {state: sum(v.state == state for v in verdicts) for state in ("passed", "failed")}
    skipped = sum(v.state == "skipped" for v in verdicts)
    text = f"{counts['passed']} passed, {counts['failed']} failed"
    return text + (f", {skipped} skipped (inputs missing)" if skipped else "")
