"""Read-only answers from the ledger: status, show partition, show run, history.

These never open the warehouse, so they work while a writer runs (docs/design.md §7). Each returns
the document that `--json` prints; its shape is described by a schema in `tidegate/schemas`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from tidegate.domain.command import CommandRecord
from tidegate.domain.errors import UsageError
from tidegate.domain.ids import looks_like_run_id
from tidegate.domain.model import DbtOrigin, ModelSpec, Version
from tidegate.domain.partitions import (
    Grain,
    PartitionKey,
    following,
    to_utc,
)
from tidegate.domain.reconciliation import ReconciliationResult
from tidegate.domain.run import Input, PublishedPartition
from tidegate.domain.taint import MarkKind, TaintedPartition
from tidegate.domain.throttle import THROTTLE_EVENT
from tidegate.ops.context import Context
from tidegate.ops.cursor import mark_doc
from tidegate.ops.cursor import status_doc as cursor_status
from tidegate.ops.schedule import next_due
from tidegate.state.base import Event, ModelState


def _spec(ctx: Context, model: str) -> tuple[ModelSpec, Version | None]:
    active = ctx.state.active_version(model)
    return (active.spec if active else ctx.view.model(model)), active


def _version_doc(version: Version | None) -> dict[str, Any] | None:
    if version is None:
        return None
    return {
        "id": version.version_id,
        "seq": version.seq,
        "fingerprint": version.fingerprint,
        "git_commit": version.git_commit,
        "git_dirty": version.git_dirty,
        "created_at": version.created_at,
        "change": version.change.value,
        **({"dbt": _dbt_doc(version.spec.dbt)} if version.spec.dbt is not None else {}),
    }


def _dbt_doc(origin: DbtOrigin) -> dict[str, str]:
    return {"node": origin.node_id, "dbt_version": origin.dbt_version, "adapter": origin.adapter}


def _label(spec: ModelSpec, start: int, end: int) -> str:
    return PartitionKey(Grain(spec.grain), start, end).label(spec.keys)


def _range_label(spec: ModelSpec, start: int, end: int) -> str:
    return spec.span(start, end).label(spec.keys)


def _partition_state(
    row: PublishedPartition, active: str | None, marks: Sequence[TaintedPartition] = ()
) -> str:
    if row.last_state.value in ("pending", "running", "staged", "audited"):
        return "running"
    if row.last_state.value == "failed":
        return "failed"
    if row.attempt_id is None:
        return row.last_state.value
    marked = marked_state({t.kind for t in marks})
    if marked is not None:
        return marked
    return "published" if row.version_id == active else "stale"


# status's count of open marks of each kind (a partition may carry several kinds)
MARK_COUNTS = {
    MarkKind.TAINT: "tainted",
    MarkKind.STALE: "upstream_changed",
    MarkKind.DIVERGED: "diverged",
    MarkKind.MISSING: "missing",
}
# a partition's state when it carries open marks: the first kind it carries in this order
MARK_STATES = (MarkKind.MISSING, MarkKind.DIVERGED, MarkKind.TAINT, MarkKind.STALE)


def mark_counts(counts: dict[MarkKind, int]) -> dict[str, int]:
    return {key: counts.get(kind, 0) for kind, key in MARK_COUNTS.items()}


def marked_state(kinds: set[MarkKind]) -> str | None:
    """What a published partition carrying open marks of `kinds` is, instead of green."""
    for kind in MARK_STATES:
        if kind in kinds:
            return MARK_COUNTS[kind]
    return None


def status(ctx: Context, model: str | None = None) -> dict[str, Any]:
    names = [model] if model else list(ctx.view.order)
    models = []
    marked = ctx.state.tainted_counts()
    for name in names:
        spec, active = _spec(ctx, name)
        model_state = ctx.state.model_state(name)
        last = ctx.state.last_run(name)
        active_id = active.version_id if active else None
        # what the active version has been through since its deploy (one read of the history)
        mine = [e for e in ctx.state.events(name) if active_id and e.version_id == active_id]
        if model:
            counts, segments = ctx.state.segments(name, active_id)
        else:
            counts, segments = ctx.state.partition_counts(name, active_id), []
        entry: dict[str, Any] = {
            "model": name,
            "grain": spec.grain.value,
            "active_version": _version_doc(active),
            "paused": bool(model_state and model_state.paused),
            "deployed_at": model_state.deployed_at if model_state else None,
            "deploy": _deploy_doc(ctx, name, active, model_state, mine),
            "nondeterministic": any(e.kind == "nondeterministic" for e in mine),
            "next_partition": _next_partition(ctx, active, model_state),
            "partitions": {**counts, **mark_counts(marked.get(name, {}))},
            "last_run": None
            if last is None
            else {
                "run_id": last.run_id,
                "kind": last.kind,
                "status": last.status.value,
                "started_at": last.started_at,
                "ended_at": last.ended_at,
            },
        }
        entry["cursor"] = None if active is None else cursor_status(ctx.state, active)
        entry["stream"] = _stream_doc(ctx, name)
        if model:
            entry["ranges"] = [
                {
                    "state": state,
                    "version": version,
                    "count": count,
                    "range": _range_label(spec, start, end),
                }
                for state, version, count, start, end in segments
            ]
        models.append(entry)
    return {
        "schema": "tidegate.status/v1",
        "project": ctx.view.name,
        "models": models,
    }


def _stream_doc(ctx: Context, model: str) -> dict[str, Any] | None:
    """A stream model's job, as its supervisor last recorded it (None: not a stream, or it never
    ran)."""
    record = ctx.state.stream(model)
    if record is None:
        return None
    from tidegate.ops.stream_lock import supervised

    version = ctx.state.get_version(record.version_id)
    return {
        "state": record.state.value,
        "version_id": record.version_id,
        "version_seq": version.seq if version else None,
        "previous_version_id": record.previous_version_id,
        "job_id": record.job_id,
        "restore_point": record.restored_from,
        "savepoint": record.savepoint,
        "checkpoint": record.checkpoint,
        "checkpoints": record.checkpoints,
        "address": record.address,
        "supervised": supervised(ctx, model),
        "supervisor_pid": record.supervisor_pid,
        "supervisor_host": record.supervisor_host,
        "heartbeat_at": record.heartbeat_at,
    }


def _deploy_doc(
    ctx: Context,
    model: str,
    active: Version | None,
    state: ModelState | None,
    events: list[Event],
) -> dict[str, Any] | None:
    """A deploy is pending until a run publishes a partition with the deployed version (a
    stream's: until its takeover was confirmed). `events`: the active version's history."""
    if active is None or state is None or state.deployed_at is None:
        return None
    run_id = ctx.state.confirming_run(model)
    checked = [e.detail for e in events if e.kind == "correctness" and e.detail]
    return {
        "version": f"v{active.seq}",
        "state": "confirmed" if run_id or _took_over(events) else "pending",
        "confirmed_by_run": run_id,
        "correctness": (
            {k: checked[-1][k] for k in ("partition", "against", "agree")} if checked else None
        ),
    }


def _took_over(events: list[Event]) -> bool:
    """Whether a stream's active version took over since it was last made active."""
    kinds = [e.kind for e in events]
    made = max((i for i, k in enumerate(kinds) if k in ("deploy", "rollback")), default=-1)
    return any(k in ("takeover", "stream_start") for k in kinds[made + 1 :])


def _next_partition(
    ctx: Context, active: Version | None, state: ModelState | None
) -> dict[str, Any] | None:
    """What the next scheduler tick writes, when, and with which version."""
    if active is None or (state is not None and state.paused):
        return None
    upcoming = next_due(ctx, active)
    if upcoming is None:
        return None
    return {
        "partition": upcoming.partition,
        "through": upcoming.through,
        "due_at": upcoming.due_at,
        "version": f"v{active.seq}",
        "unpublished": list(upcoming.unpublished),
    }


def show_partition(ctx: Context, model: str, label: str) -> dict[str, Any]:
    spec, active = _spec(ctx, model)
    if spec.stream is not None:
        raise UsageError(
            f"{model} is a stream: it has no partitions; `tidegate status {model}` shows its "
            f"job and `tidegate history {model}` its savepoints"
        )
    key = spec.parse_partition(label)
    row = ctx.state.partition(model, key.start)
    if row is None:
        raise UsageError(f"{model} partition {label} has never been written")
    published = None
    if row.attempt_id is not None and row.version_id is not None:
        writer = ctx.state.get_version(row.version_id)
        published = {
            "version": _version_doc(writer),
            "run_id": row.run_id,
            "attempt_id": row.attempt_id,
            "published_at": row.published_at,
            "rows": row.rows,
            "checksum": row.checksum,
            "checks": [check_doc(c) for c in ctx.state.checks(row.attempt_id)],
            "reconciliations": _reconciliation_docs(ctx, row.attempt_id),
            "inputs": [
                {
                    "upstream": i.upstream,
                    "kind": i.kind,
                    "range": _input_range(ctx, spec if writer is None else writer.spec, i),
                    "fingerprint": i.fingerprint,
                    "attempts": list(i.upstream_attempts),
                }
                for i in ctx.state.inputs(row.attempt_id)
            ],
        }
        if ctx.view.tables == "iceberg":
            published["iceberg"] = _snapshot(ctx, model, row.attempt_id)
    last = ctx.state.get_attempt(row.last_attempt_id)
    marks = [
        t for t in ctx.state.open_taints(model, key.start, key.end) if t.mark.start == key.start
    ]
    return {
        "schema": "tidegate.partition/v1",
        "model": model,
        "partition": key.label(spec.keys),
        "state": _partition_state(row, active.version_id if active else None, marks),
        "active_version": active.version_id if active else None,
        "published": published,
        "taints": [
            {
                "taint_id": t.taint_id,
                "kind": t.kind.value,
                "reason": t.reason,
                "origin": t.origin,
                "depth": t.mark.depth,
                "via": None
                if t.mark.via_model is None or t.mark.via_start is None
                else f"{t.mark.via_model} {_via_label(ctx, t.mark.via_model, t.mark.via_start)}",
                "marked_at": t.marked_at,
            }
            for t in marks
        ],
        "last_attempt": None
        if last is None
        else {
            "attempt_id": last.attempt_id,
            "run_id": last.run_id,
            "state": last.state.value,
            "version_id": last.version_id,
            "started_at": last.started_at,
            "ended_at": last.ended_at,
            "error": last.error,
            "checks": [check_doc(c) for c in ctx.state.checks(last.attempt_id)],
        },
    }


def _snapshot(ctx: Context, model: str, attempt_id: str) -> dict[str, Any] | None:
    """Main's Iceberg snapshot holding what the attempt published."""
    from tidegate.engines.factory import open_iceberg_tables

    tables = open_iceberg_tables(ctx.project)
    try:
        found = tables.published_in(model, attempt_id)
    finally:
        tables.close()
    if found is None:
        return None
    committed = datetime.fromtimestamp(found["committed_at"] / 1000, tz=timezone.utc)
    return {**found, "committed_at": committed.isoformat()}


def _via_label(ctx: Context, model: str, start: int) -> str:
    spec = _spec(ctx, model)[0]
    return _label(spec, start, following(spec.grain, start, spec.chunk_size))


def _input_range(ctx: Context, reader: ModelSpec, read: Input) -> str:
    """What a partition read of an input, as `reader` (the version that wrote it) declared it:
    an upstream model's partitions; a source's time window, the rows holding its key or its
    cursor interval — or all its rows (a key or cursor partition reading a source whole)."""
    start, end = read.range_start, read.range_end
    if read.kind != "source":
        return _range_label(_spec(ctx, read.upstream)[0], start, end)
    if reader.grain.is_time:
        return f"{to_utc(start).isoformat()}..{to_utc(end).isoformat()}"
    column = reader.key_column_in(read.upstream)
    if column is not None:
        return f"{column} = {_range_label(reader, start, end)}"
    if reader.cursor is not None and reader.cursor.source == read.upstream:
        return f"{reader.cursor.column} in {_range_label(reader, start, end)}"
    return "all rows"


def check_doc(check: Any) -> dict[str, Any]:
    doc = asdict(check)
    doc["severity"] = check.severity.value
    return doc


def show_run(ctx: Context, run_id: str) -> dict[str, Any]:
    if not looks_like_run_id(run_id):
        raise UsageError(f"{run_id!r} is not a run id (run-…)")
    found = ctx.state.get_run(run_id)
    if found is None:
        raise UsageError(f"no run {run_id}")
    attempts = []
    specs: dict[str, ModelSpec] = {}
    tainted = {t.mark.attempt_id: t.reason for m in found.models for t in ctx.state.open_taints(m)}
    checks = ctx.state.checks_of_run(run_id)
    for attempt in ctx.state.attempts_of_run(run_id):
        if attempt.model not in specs:
            writer = ctx.state.get_version(attempt.version_id)
            specs[attempt.model] = writer.spec if writer else _spec(ctx, attempt.model)[0]
        attempts.append(
            {
                "attempt_id": attempt.attempt_id,
                "model": attempt.model,
                "partition": _label(
                    specs[attempt.model], attempt.partition_start, attempt.partition_end
                ),
                "version_id": attempt.version_id,
                "state": attempt.state.value,
                "rows": attempt.rows,
                "checksum": attempt.checksum,
                "error": attempt.error,
                "batch": attempt.batch,
                "started_at": attempt.started_at,
                "ended_at": attempt.ended_at,
                "failed_checks": [
                    c.name for c in checks.get(attempt.attempt_id, ()) if not c.passed
                ],
                "reconciliations": _reconciliation_docs(ctx, attempt.attempt_id),
                "taint": tainted.get(attempt.attempt_id),
                "command": _command_doc(ctx.state.command(attempt.attempt_id)),
            }
        )
    return {
        "schema": "tidegate.run/v1",
        "run_id": found.run_id,
        "kind": found.kind,
        "models": list(found.models),
        "partitions": found.partitions,
        "requester": found.requester,
        "status": found.status.value,
        "reason": found.reason,
        "started_at": found.started_at,
        "ended_at": found.ended_at,
        "trigger": found.trigger,
        "stop_requested_at": found.stop_requested_at,
        "plan": json.loads(found.plan) if found.plan else None,
        "plan_hash": found.plan_hash,
        "attempts": attempts,
        "throttle": [
            {"at": e.at, "reason": e.reason, **(e.detail or {})}
            for model in found.models
            for e in ctx.state.events(model)
            if e.kind == THROTTLE_EVENT and e.run_id == run_id
        ],
        "cursor": _cursor_marks(ctx, run_id),
    }


def _cursor_marks(ctx: Context, run_id: str) -> list[dict[str, object]]:
    """How far the run took each cursor model, and why."""
    found = []
    for mark in ctx.state.run_cursor_marks(run_id):
        cursor = ctx.view.models[mark.model].cursor if mark.model in ctx.view.models else None
        same = cursor is not None and cursor.identity == (mark.table, mark.column)
        found.append(mark_doc(mark, cursor if same else None))
    return found


def _command_doc(record: CommandRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {
        "command": list(record.command),
        "environment": dict(record.environment),
        "pid": record.pid,
        "exit_code": record.exit_code,
        "duration_ms": record.duration_ms,
        "stderr_tail": record.stderr_tail,
        "started_at": record.started_at,
        "ended_at": record.ended_at,
    }


def reconciliation_doc(result: ReconciliationResult) -> dict[str, Any]:
    return {
        "name": result.name,
        "source_value": result.source_value,
        "target_value": result.target_value,
        "tolerance": result.tolerance,
        "passed": result.passed,
    }


def _reconciliation_docs(ctx: Context, attempt_id: str) -> list[dict[str, Any]]:
    return [reconciliation_doc(r) for r in ctx.state.reconciliations(attempt_id)]


def history(ctx: Context, model: str) -> dict[str, Any]:
    ctx.view.model(model)
    events = [
        {
            "kind": e.kind,
            "at": e.at,
            "actor": e.actor,
            "version_id": e.version_id,
            "run_id": e.run_id,
            "reason": e.reason,
            "detail": e.detail or {},
        }
        for e in ctx.state.events(model)
    ]
    return {"schema": "tidegate.history/v1", "model": model, "events": events}
