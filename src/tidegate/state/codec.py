"""Turning domain values into ledger rows and back."""

from __future__ import annotations

import json
from typing import Any

from tidegate.domain.attempt import AttemptState, RunStatus
from tidegate.domain.checks import CheckResult
from tidegate.domain.cursor import CursorKind, CursorSpec
from tidegate.domain.gate import Gate
from tidegate.domain.model import (
    ChangeKind,
    CheckSpec,
    Column,
    DbtOrigin,
    ModelKind,
    ModelSpec,
    Program,
    Reconciliation,
    Severity,
    UpdateSpec,
    Version,
    WriteMode,
)
from tidegate.domain.partitions import Grain
from tidegate.domain.reconciliation import ReconciliationResult
from tidegate.domain.run import Attempt, Input, PublishedPartition, Run
from tidegate.domain.stream import stream_from_config
from tidegate.domain.taint import Mark, MarkKind, Taint, TaintedPartition
from tidegate.notify.row import OutboxRow
from tidegate.state.base import Event, ModelState


def spec_to_json(spec: ModelSpec) -> str:
    return json.dumps(
        {
            "name": spec.name,
            "path": spec.path,
            "sql": spec.sql,
            "grain": spec.grain.value,
            "partition_column": spec.partition_column,
            "columns": [[c.name, c.type, c.nullable] for c in spec.columns],
            "start": spec.start,
            "keys": list(spec.keys),
            "write_mode": spec.write_mode.value,
            "unique_key": list(spec.unique_key),
            "schedule": spec.schedule,
            "deprecated": [list(d) for d in spec.deprecated],
            "checks": [[c.name, c.kind, c.severity.value, dict(c.params)] for c in spec.checks],
            "upstream": list(spec.upstream),
            "sources": list(spec.sources),
            "reconciliations": [
                [r.name, r.source, r.source_expression, r.target_expression, r.tolerance]
                for r in spec.reconciliations
            ],
            **({"program": _program_doc(spec.program)} if spec.program else {}),
            **({"chunk_size": spec.chunk_size} if spec.chunk_size else {}),
            **({"update": spec.update.config()} if spec.update else {}),
            **({"cursor": spec.cursor.config()} if spec.cursor else {}),
            **({"key_sources": [list(p) for p in spec.key_sources]} if spec.key_sources else {}),
            **({"min_rows": spec.min_rows} if spec.min_rows is not None else {}),
            **({"dbt": spec.dbt.config()} if spec.dbt is not None else {}),
            **({"whole_reads": list(spec.whole_reads)} if spec.whole_reads else {}),
            **({"stream": spec.stream.config()} if spec.stream is not None else {}),
        },
        sort_keys=True,
    )


def _program_doc(program: Program) -> dict[str, Any]:
    return {
        **program.config(),
        "env": [list(pair) for pair in program.env],
        "timeout_seconds": program.timeout_seconds,
    }


def _program_from(data: dict[str, Any] | None) -> Program | None:
    if data is None:
        return None
    return Program(
        kind=ModelKind(data["kind"]),
        entry=tuple(data["entry"]),
        files=tuple((path, digest) for path, digest in data["files"]),
        packages=tuple((name, version) for name, version in data["packages"]),
        env=tuple((name, value) for name, value in data["env"]),
        passthrough=tuple(data.get("env_passthrough", ())),
        timeout_seconds=data["timeout_seconds"],
        revision=data.get("revision"),
    )


def spec_from_json(text: str) -> ModelSpec:
    data: dict[str, Any] = json.loads(text)
    return ModelSpec(
        name=data["name"],
        path=data["path"],
        sql=data["sql"],
        grain=Grain(data["grain"]),
        partition_column=data["partition_column"],
        columns=tuple(Column(n, t, bool(nullable)) for n, t, nullable in data["columns"]),
        start=data["start"],
        keys=tuple(data["keys"]),
        write_mode=WriteMode(data["write_mode"]),
        unique_key=tuple(data["unique_key"]),
        schedule=data["schedule"],
        deprecated=tuple((c, d) for c, d in data.get("deprecated", [])),
        checks=tuple(
            CheckSpec(name, kind, Severity(severity), params)
            for name, kind, severity, params in data["checks"]
        ),
        upstream=tuple(data["upstream"]),
        sources=tuple(data["sources"]),
        reconciliations=tuple(Reconciliation(*r) for r in data.get("reconciliations", [])),
        program=_program_from(data.get("program")),
        chunk_size=data.get("chunk_size", 0),
        update=UpdateSpec.from_config(data["update"]) if "update" in data else None,
        cursor=_cursor_from(data.get("cursor")),
        key_sources=tuple((source, col) for source, col in data.get("key_sources", [])),
        min_rows=data.get("min_rows"),
        dbt=_dbt_from(data.get("dbt")),
        whole_reads=tuple(data.get("whole_reads", ())),
        stream=stream_from_config(data["stream"]) if "stream" in data else None,
    )


def _dbt_from(data: dict[str, Any] | None) -> DbtOrigin | None:
    if data is None:
        return None
    return DbtOrigin(
        node_id=data["node"],
        checksum=data["checksum"],
        macros=tuple((macro, digest) for macro, digest in data["macros"]),
        dbt_version=data["dbt"],
        adapter=data["adapter"],
    )


def _cursor_from(data: dict[str, Any] | None) -> CursorSpec | None:
    if data is None:
        return None
    return CursorSpec(
        source=data["source"],
        table=data["table"],
        column=data["column"],
        kind=CursorKind(data["kind"]),
        start=data["start"],
        lag=data["lag"],
        batch_rows=data["batch_rows"],
        unique=bool(data.get("unique", False)),
    )


def version_row(version: Version) -> tuple[Any, ...]:
    return (
        version.version_id,
        version.model,
        version.seq,
        version.fingerprint,
        version.sql,
        spec_to_json(version.spec),
        json.dumps(dict(version.upstream_fingerprints), sort_keys=True),
        version.git_commit,
        int(version.git_dirty),
        json.dumps(dict(version.tool_versions), sort_keys=True),
        version.change.value,
        version.created_at,
    )


def version_from_row(row: Any) -> Version:
    return Version(
        version_id=row["version_id"],
        model=row["model"],
        seq=row["seq"],
        fingerprint=row["fingerprint"],
        sql=row["sql_text"],
        spec=spec_from_json(row["spec"]),
        upstream_fingerprints=json.loads(row["upstream"]),
        git_commit=row["git_commit"],
        git_dirty=bool(row["git_dirty"]),
        tool_versions=json.loads(row["tool_versions"]),
        created_at=row["created_at"],
        change=ChangeKind(row["change"]),
    )


# Rows of the other ledger tables. A row is read by column name (sqlite3.Row, or the
# PostgreSQL store's named rows); parameters are tuples in the tables' column order.


def run_params(run: Run) -> tuple[Any, ...]:
    """runs: run_id, kind, models, partitions, params, requester, status, reason, pid,
    started_at, ended_at, plan, plan_hash, distributed."""
    return (
        run.run_id,
        run.kind,
        json.dumps(list(run.models)),
        run.partitions,
        json.dumps(run.params, sort_keys=True),
        run.requester,
        run.status.value,
        run.reason,
        run.pid,
        run.started_at,
        run.ended_at,
        run.plan,
        run.plan_hash,
        int(run.distributed),
    )


def run_from_row(row: Any) -> Run:
    return Run(
        run_id=row["run_id"],
        kind=row["kind"],
        models=tuple(json.loads(row["models"])),
        partitions=row["partitions"],
        requester=row["requester"],
        status=RunStatus(row["status"]),
        started_at=row["started_at"],
        params=json.loads(row["params"]),
        pid=row["pid"],
        reason=row["reason"],
        ended_at=row["ended_at"],
        plan=row["plan"],
        plan_hash=row["plan_hash"],
        trigger=row["trigger"],
        stop_requested_at=row["stop_requested_at"],
        distributed=bool(row["distributed"]),
    )


def attempt_params(attempt: Attempt, batch: int | None) -> tuple[Any, ...]:
    """attempts: attempt_id, run_id, model, grain, partition_start, partition_end, version_id,
    state, started_at, batch."""
    return (
        attempt.attempt_id,
        attempt.run_id,
        attempt.model,
        attempt.grain,
        attempt.partition_start,
        attempt.partition_end,
        attempt.version_id,
        attempt.state.value,
        attempt.started_at,
        batch,
    )


def attempt_partition_params(attempt: Attempt) -> tuple[Any, ...]:
    """partitions, as a new attempt leaves them: model, grain, partition_start, partition_end,
    last_attempt_id, last_state."""
    return (
        attempt.model,
        attempt.grain,
        attempt.partition_start,
        attempt.partition_end,
        attempt.attempt_id,
        attempt.state.value,
    )


def attempt_from_row(row: Any) -> Attempt:
    return Attempt(
        attempt_id=row["attempt_id"],
        run_id=row["run_id"],
        model=row["model"],
        grain=row["grain"],
        partition_start=row["partition_start"],
        partition_end=row["partition_end"],
        version_id=row["version_id"],
        state=AttemptState(row["state"]),
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        rows=row["row_count"],
        checksum=row["checksum"],
        error=row["error"],
        batch=row["batch"],
    )


def check_params(attempt_id: str, result: CheckResult) -> tuple[Any, ...]:
    """check_results: attempt_id, name, kind, severity, passed, measured, message."""
    return (
        attempt_id,
        result.name,
        result.kind,
        result.severity.value,
        int(result.passed),
        result.measured,
        result.message,
    )


def check_from_row(row: Any) -> CheckResult:
    return CheckResult(
        row["name"],
        row["kind"],
        Severity(row["severity"]),
        bool(row["passed"]),
        row["measured"],
        row["message"],
    )


def reconciliation_params(attempt_id: str, result: ReconciliationResult) -> tuple[Any, ...]:
    """reconciliations: attempt_id, name, source_value, target_value, tolerance, passed."""
    return (
        attempt_id,
        result.name,
        result.source_value,
        result.target_value,
        result.tolerance,
        int(result.passed),
    )


def reconciliation_from_row(row: Any) -> ReconciliationResult:
    return ReconciliationResult(
        row["name"], row["source_value"], row["target_value"], row["tolerance"], bool(row["passed"])
    )


def input_params(attempt_id: str, read: Input) -> tuple[Any, ...]:
    """attempt_inputs: attempt_id, upstream, kind, range_start, range_end, fingerprint,
    upstream_attempts."""
    return (
        attempt_id,
        read.upstream,
        read.kind,
        read.range_start,
        read.range_end,
        read.fingerprint,
        json.dumps(list(read.upstream_attempts)),
    )


def input_from_row(row: Any) -> Input:
    return Input(
        row["upstream"],
        row["kind"],
        row["range_start"],
        row["range_end"],
        row["fingerprint"],
        tuple(json.loads(row["upstream_attempts"])),
    )


def partition_from_row(row: Any) -> PublishedPartition:
    return PublishedPartition(
        model=row["model"],
        grain=row["grain"],
        partition_start=row["partition_start"],
        partition_end=row["partition_end"],
        version_id=row["version_id"],
        run_id=row["run_id"],
        attempt_id=row["attempt_id"],
        rows=row["row_count"],
        checksum=row["checksum"],
        published_at=row["published_at"],
        last_attempt_id=row["last_attempt_id"],
        last_state=AttemptState(row["last_state"]),
        last_error=row["last_error"],
    )


def model_state_from_row(row: Any) -> ModelState:
    return ModelState(
        row["model"],
        row["active_version"],
        row["previous_version"],
        bool(row["paused"]),
        row["deployed_at"],
    )


def event_params(event: Event) -> tuple[Any, ...]:
    """events: model, kind, version_id, run_id, actor, reason, at, detail."""
    return (
        event.model,
        event.kind,
        event.version_id,
        event.run_id,
        event.actor,
        event.reason,
        event.at,
        json.dumps(event.detail or {}, sort_keys=True),
    )


def event_from_row(row: Any) -> Event:
    return Event(
        kind=row["kind"],
        actor=row["actor"],
        at=row["at"],
        model=row["model"],
        version_id=row["version_id"],
        run_id=row["run_id"],
        reason=row["reason"],
        detail=json.loads(row["detail"]),
    )


def gate_params(gate: Gate) -> tuple[Any, ...]:
    """gates: gate_id, model, version_id, passed, flaky, inputs, partitions, report, actor,
    created_at."""
    return (
        gate.gate_id,
        gate.model,
        gate.version_id,
        int(gate.passed),
        int(gate.flaky),
        gate.inputs,
        json.dumps(list(gate.partitions)),
        json.dumps(gate.report, sort_keys=True),
        gate.actor,
        gate.created_at,
    )


def gate_from_row(row: Any) -> Gate:
    return Gate(
        gate_id=row["gate_id"],
        model=row["model"],
        version_id=row["version_id"],
        passed=bool(row["passed"]),
        flaky=bool(row["flaky"]),
        inputs=row["inputs"],
        partitions=tuple(json.loads(row["partitions"])),
        report=json.loads(row["report"]),
        actor=row["actor"],
        created_at=row["created_at"],
    )


def outbox_from_row(
    row: Any, attempts: int | None = None, next_attempt_at: str | None = None
) -> OutboxRow:
    """An outbox row; `attempts` and `next_attempt_at` as a claim leaves them, when given."""
    return OutboxRow(
        id=row["id"],
        target=row["target"],
        payload=row["payload"],
        created_at=row["created_at"],
        attempts=row["attempts"] if attempts is None else attempts,
        next_attempt_at=row["next_attempt_at"] if next_attempt_at is None else next_attempt_at,
        delivered_at=row["delivered_at"],
        last_error=row["last_error"],
    )


def taint_params(taint: Taint) -> tuple[Any, ...]:
    """taints: taint_id, model, grain, range_start, range_end, reason, actor, created_at,
    kind, run_id."""
    return (
        taint.taint_id,
        taint.model,
        taint.grain,
        taint.start,
        taint.end,
        taint.reason,
        taint.actor,
        taint.at,
        taint.kind.value,
        taint.run_id,
    )


def mark_params(taint: Taint, mark: Mark) -> tuple[Any, ...]:
    """tainted_partitions: taint_id, model, partition_start, partition_end, attempt_id, depth,
    via_model, via_start, marked_at."""
    return (
        taint.taint_id,
        mark.model,
        mark.start,
        mark.end,
        mark.attempt_id,
        mark.depth,
        mark.via_model,
        mark.via_start,
        taint.at,
    )


def tainted_from_row(row: Any) -> TaintedPartition:
    mark = Mark(
        row["model"],
        row["partition_start"],
        row["partition_end"],
        row["attempt_id"],
        row["depth"],
        row["via_model"],
        row["via_start"],
    )
    return TaintedPartition(
        row["taint_id"],
        mark,
        row["reason"],
        row["origin"],
        row["marked_at"],
        MarkKind(row["kind"]),
    )
