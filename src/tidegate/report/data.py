"""The ledger as the report's view model: one JSON-ready document, read in one snapshot.

Reads only the ledger (never the warehouse), like `status`, so it works while a writer runs.
Per model, the partitions from the first to the last one due are cells in run-length segments
(see cells.py); the file report adds each cell's run and checksum, the live UI fetches a
clicked partition's details instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from tidegate.domain.attempt import RunStatus
from tidegate.domain.model import ModelSpec, Version
from tidegate.domain.partitions import (
    Grain,
    IntervalSet,
    PartitionKey,
    floor,
    to_epoch,
)
from tidegate.domain.run import Run
from tidegate.domain.schedule import last_fire
from tidegate.domain.taint import TaintedPartition
from tidegate.ops.context import Context
from tidegate.report import cells as grid
from tidegate.report.notices import notice_doc
from tidegate.report.rows import CellRow, FailingCheck, RunSummary

FORMAT = 1
RUNS_SHOWN = 200
EVENTS_SHOWN = 500
CHECKS_SHOWN = 200
NOTICES_SHOWN = 200
BACKFILL = "backfill"  # ops.backfill.KIND: the report does not import the operations


@dataclass
class _Refs:
    """Versions and runs are sent once, and referred to by their index."""

    versions: list[dict[str, Any]] = field(default_factory=list)
    version_index: dict[str, int] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    run_index: dict[str, int] = field(default_factory=dict)

    def add_version(self, version: Version, active: str | None) -> None:
        self.version_index[version.version_id] = len(self.versions)
        self.versions.append(
            {
                "id": version.version_id,
                "model": version.model,
                "seq": version.seq,
                "change": version.change.value,
                "created_at": utc_second(version.created_at),
                "git_commit": version.git_commit,
                "git_dirty": version.git_dirty,
                "active": version.version_id == active,
                "checks": [c.name for c in version.spec.checks],
            }
        )

    def run(self, run_id: str | None) -> int:
        if run_id is None:
            return -1
        found = self.run_index.get(run_id)
        if found is None:
            found = self.run_index[run_id] = len(self.runs)
            self.runs.append(run_id)
        return found


def build_view(ctx: Context, *, details: bool, live: bool = False) -> dict[str, Any]:
    """The whole view model. `details`: each cell's run, checksum and failures (the file
    report); without, the page asks the server for a clicked partition."""
    state = ctx.state
    now = ctx.clock.now()
    refs = _Refs()
    models: list[dict[str, Any]] = []
    taints: list[dict[str, Any]] = []
    with state.reading():
        plans = live_plans(state.live_runs())
        for name in ctx.project.order:
            model, marks = _model(ctx, name, refs, details, now, plans.get(name, []))
            models.append(model)
            taints += marks
        keys = {m["name"]: tuple(m["keys"]) for m in models}
        runs = [_run_doc(s, now) for s in state.run_summaries(RUNS_SHOWN)]
        events = [
            {
                "at": utc_second(e.at),
                "model": e.model,
                "kind": e.kind,
                "version": refs.version_index.get(e.version_id or "", -1),
                "run_id": e.run_id,
                "actor": e.actor,
                "reason": e.reason,
                "detail": _detail_text(e.detail),
            }
            for e in state.recent_events(EVENTS_SHOWN)
        ]
        failing = check_docs(state.failing_checks(CHECKS_SHOWN), keys)
        consumers = ctx.project.settings.consumers
        notices = [
            _seconds_only(notice_doc(row, consumers), NOTICE_TIMES)
            for row in state.recent_outbox(NOTICES_SHOWN)
        ]
        stamp = state.ledger_stamp()
    return {
        "format": FORMAT,
        "project": ctx.project.settings.project.name,
        "as_of": utc_second(now.isoformat()),
        "live": live,
        "stamp": stamp,
        "states": list(grid.STATES),
        "versions": refs.versions,
        "run_ids": refs.runs,
        "models": models,
        "runs": runs,
        "events": events,
        "failing_checks": failing,
        "taints": taints,
        "notices": notices,
    }


def _spec(ctx: Context, name: str) -> tuple[ModelSpec, Version | None]:
    active = ctx.state.active_version(name)
    return (active.spec if active else ctx.project.model(name)), active


def expected(spec: ModelSpec, now: datetime) -> tuple[int, int] | None:
    """The partitions due by `now` — from the model's start to the last one its schedule has
    fired for — or every declared key; None when the model declares no start."""
    if spec.grain in (Grain.KEY, Grain.TABLE):
        return (0, len(spec.keys))
    if spec.grain is Grain.RANGE:
        return None  # run on request: the chunks the ledger knows are drawn
    end = floor(spec.grain, last_fire(spec.schedule, to_epoch(now)))
    due = spec.all_partitions_until(end)
    return (due.start, due.end) if spec.first_partition() else None


Plan = tuple[str, list[tuple[int, int]]]


def live_plans(runs: list[Run]) -> dict[str, list[Plan]]:
    """Per model, the (run id, selection) of each backfill still running: the partitions it
    is yet to write are drawn as queued. A plan that does not read as one is left out: the
    report shows what it can rather than fail on it."""
    plans: dict[str, list[Plan]] = {}
    for run in runs:
        if run.kind != BACKFILL or run.ended_at is not None or not run.plan:
            continue
        try:
            document = json.loads(run.plan)
            model = document["model"]
            selection = [(int(start), int(end)) for start, end in document["selection"]]
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(model, str):
            plans.setdefault(model, []).append((run.run_id, selection))
    return plans


def _model(
    ctx: Context,
    name: str,
    refs: _Refs,
    details: bool,
    now: datetime,
    plans: list[Plan],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A model's document, and its open taints grouped into ranges."""
    state = ctx.state
    spec, active = _spec(ctx, name)
    active_id = active.version_id if active else None
    for version in state.versions(name):
        refs.add_version(version, active_id)
    rows = state.partition_cells(name, active_id)
    cal = grid.calendar(spec.grain, expected(spec, now), rows, spec.chunk_size)
    cells = grid.paint(cal, rows, refs.version_index)
    grid.queue(cells, cal, rows, plans)
    taints = state.open_taints(name)
    grid.taint(cells, cal, IntervalSet.of([(t.mark.start, t.mark.end) for t in taints]).intervals)
    counts = grid.counts(cells)
    model_state = state.model_state(name)
    confirmed = state.confirming_run(name) if active else None
    doc = {
        "name": name,
        "grain": spec.grain.value,
        # a cursor model's cells are labelled like key-list cells: one label per interval
        "keys": (
            [PartitionKey(spec.grain, r.start, r.end).label() for r in rows]
            if spec.grain is Grain.CURSOR
            else list(spec.keys)
        ),
        "chunk_size": spec.chunk_size,
        "first": cal.first,
        "n": cal.n,
        "active": refs.version_index.get(active_id or "", -1),
        "paused": bool(model_state and model_state.paused),
        "deploy": None if active is None else ("confirmed" if confirmed else "pending"),
        "confirmed_by": confirmed,
        "counts": counts,
        "health": health(name, counts),
        "segments": grid.run_length(cells),
        "details": _details(ctx, name, cal, rows, refs) if details else None,
    }
    return doc, _taints(spec, cal, name, taints)


def health(name: str, counts: dict[str, int]) -> dict[str, Any]:
    """A model at a glance: one line naming the states it has partitions in, in legend order,
    and the share of each for a thin bar (states it has none in are left out of both)."""
    shown = [(state, counts.get(state, 0)) for state in grid.STATES if counts.get(state, 0)]
    total = sum(n for _, n in shown)
    if not total:
        return {"line": f"{name}: no partitions due", "bar": []}
    line = " · ".join(f"{n:,} {state}" for state, n in shown)
    return {
        "line": f"{name}: {line}",
        "bar": [[state, round(n / total, 4)] for state, n in shown],
    }


def _details(
    ctx: Context, name: str, cal: grid.Calendar, rows: list[CellRow], refs: _Refs
) -> dict[str, Any]:
    """Per cell: the run that wrote what is published and its checksum ("rows:digest"); sparse,
    by ordinal: the newest attempt when it is not the published one, and failing checks."""
    runs = [-1] * cal.n
    checksums = [""] * cal.n
    last: dict[str, list[Any]] = {}
    for row in rows:
        at = cal.ordinal(row.start)
        if not 0 <= at < cal.n:
            continue
        runs[at] = refs.run(row.run_id)
        checksums[at] = row.checksum or ""
        if row.last_run_id is not None:
            version = refs.version_index.get(row.last_version_id or "", -1)
            last[str(at)] = [refs.run(row.last_run_id), version, row.error]
    failing: dict[str, list[list[str]]] = {}
    for check in ctx.state.current_check_failures(name):
        at = cal.ordinal(check.start)
        if 0 <= at < cal.n:
            failing.setdefault(str(at), []).append([check.name, check.severity, check.message])
    return {"run": runs, "checksum": checksums, "last": last, "checks": failing}


def _taints(
    spec: ModelSpec, cal: grid.Calendar, name: str, taints: list[TaintedPartition]
) -> list[dict[str, Any]]:
    """Open taint marks of a model, grouped by taint into ranges (labels, and the cells they
    cover as [from, to) ordinals)."""
    grouped: dict[str, list[TaintedPartition]] = {}
    for found in taints:
        grouped.setdefault(found.taint_id, []).append(found)
    docs = []
    for taint_id, marks in grouped.items():
        spans = IntervalSet.of([(m.mark.start, m.mark.end) for m in marks]).intervals
        docs.append(
            {
                "taint_id": taint_id,
                "model": name,
                "origin": marks[0].origin,
                "reason": marks[0].reason,
                "depth": min(m.mark.depth for m in marks),
                "partitions": len(marks),
                "ranges": [spec.span(s, e).label(spec.keys) for s, e in spans],
                "cells": [[cal.ordinal(s), cal.ordinal(e)] for s, e in spans],
                "marked_at": utc_second(min(m.marked_at for m in marks)),
            }
        )
    return docs


def _seconds(summary: RunSummary, now: datetime) -> float:
    """How long the run took, or has taken so far (a live run: until now, or its newest
    attempt when `--as-of` puts now before it)."""
    run = summary.run
    ends = [datetime.fromisoformat(t) for t in (run.ended_at, summary.last_attempt_at) if t]
    if run.status is RunStatus.RUNNING:
        ends = [max([now, *ends])]
    if not ends:
        return 0.0
    return max((ends[0] - datetime.fromisoformat(run.started_at)).total_seconds(), 0.0)


def _run_doc(summary: RunSummary, now: datetime) -> dict[str, Any]:
    run = summary.run
    seconds = _seconds(summary, now)
    per_minute, text = throughput(summary.states.get("published", 0), seconds)
    return {
        "run_id": run.run_id,
        "kind": run.kind,
        "status": run.status.value,
        "models": list(run.models),
        "partitions": run.partitions,
        "requester": run.requester,
        "started_at": utc_second(run.started_at),
        "ended_at": utc_second(run.ended_at),
        "seconds": round(seconds, 3),
        "reason": run.reason,
        "trigger": run.trigger,
        "stop_requested_at": utc_second(run.stop_requested_at),
        "attempts": summary.states,
        "rows": summary.rows,
        "per_minute": per_minute,
        "throughput": text,
    }


def check_docs(
    checks: list[FailingCheck], keys: dict[str, tuple[str, ...]]
) -> list[dict[str, Any]]:
    """Failing checks, the open ones first: a failure a later publish fixed stays listed (it
    explains a gap in history) but no longer asks for attention."""
    docs = [_check_doc(c, keys) for c in checks]
    return sorted(docs, key=lambda doc: doc["resolved_by"] is not None)


def _check_doc(check: FailingCheck, keys: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    key = PartitionKey(Grain(check.grain), check.start, check.end)
    return {
        "model": check.model,
        "partition": key.label(keys.get(check.model, ())),
        "run_id": check.run_id,
        "attempt_id": check.attempt_id,
        "name": check.name,
        "kind": check.kind,
        "severity": check.severity,
        "message": check.message,
        "at": utc_second(check.at),
        "resolved_by": check.resolved_by,
        "resolved_at": utc_second(check.resolved_at),
    }


def utc_second(text: str | None) -> str | None:
    """A ledger time as people read it: UTC, to the second (cut, not rounded, so a time never
    moves past a later one), in ISO form so the page still parses it. Left as it is when it
    does not read as a time."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return text
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)  # the ledger writes UTC
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def throughput(published: int, seconds: float) -> tuple[float | None, str | None]:
    """Partitions published per minute: whole ones once there are ten or more (no one reads
    the hundredths of 12,643.58), one decimal below that so a slow run does not read as 0."""
    if not published or seconds <= 0:
        return None, None
    rate = published * 60 / seconds
    shown: float = round(rate) if rate >= 10 else round(rate, 1)
    return shown, f"{shown:,} partitions/min"


NOTICE_TIMES = ("created_at", "delivered_at", "next_attempt_at")


def _seconds_only(doc: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {**doc, **{key: utc_second(doc[key]) for key in keys}}


def _detail_text(detail: dict[str, Any] | None) -> str:
    """An event's detail as one short line (the full document is in `history --json`)."""
    if not detail:
        return ""
    text = json.dumps(detail, sort_keys=True, separators=(", ", ": "), default=str)
    return text if len(text) <= 300 else text[:297] + "…"
