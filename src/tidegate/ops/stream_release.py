"""Releasing a stream model: what deploy, rollback, pause and unpause do beyond setting the
ledger's active version — wait for the supervisor to carry it out and report how it went, and
for a rollback, choose the savepoint it restarts from and count what that re-reads.

A stream's supervisor reconciles the ledger (ops/stream.py); these commands write the ledger and
then follow the model's history until the supervisor has answered: a takeover confirmed, or
refused (the previous version then runs again from the same savepoint: exit 1, nothing lost).
With no supervisor running, the ledger is changed and the next `tidegate stream start` acts.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass

from tidegate.domain.errors import ModelError, OperationFailed, RefusedError
from tidegate.domain.model import Version
from tidegate.domain.stream import StreamState, newer_output
from tidegate.flink import places
from tidegate.ops.context import Context
from tidegate.ops.stream import stream_spec
from tidegate.ops.stream_lock import supervised
from tidegate.state.base import Event

POLL_SECONDS = 0.25
# beyond a takeover's own timeout: stopping the running job with a savepoint, starting the JVM
MARGIN_SECONDS = 90.0
SETTLED = {True: StreamState.STOPPED, False: StreamState.RUNNING}
ANSWERS = ("stream_start", "takeover", "takeover_failed", "stream_failed")


@dataclass(frozen=True)
class RollbackPlan:
    """Where a stream's rollback restarts from and what that re-reads."""

    restore: str | None  # the savepoint the deploy being undone took (None: the running state)
    withdrawn_files: int
    withdrawn_rows: int  # output rows committed since, taken back: their events are read again


def stream_problems(ctx: Context, version: Version) -> list[str]:
    """What would stop a stream version from starting: its code gone, or a checkpoint location
    it cannot write."""
    spec = stream_spec(version)
    problems = []
    try:
        places.code_of(ctx.project_dir, version)
    except ModelError as error:
        problems.append(str(error))
    checkpoints = places.checkpoints_of(ctx.project_dir, spec)
    try:
        checkpoints.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=checkpoints):
            pass
    except OSError as error:
        problems.append(f"checkpoints: {checkpoints} is not writable ({error.strerror})")
    return problems


def plan_rollback(ctx: Context, current: Version, target: Version, approve: bool) -> RollbackPlan:
    """The savepoint `current`'s deploy took from `target` (the state before it ran), and the
    output committed since, which the rollback withdraws; RefusedError when that output is
    not idempotent and the rollback is not approved."""
    spec = stream_spec(current)
    restore = _deploy_savepoint(ctx, current, target)
    kept = places.manifest_of(restore) if restore else None
    if restore is None or kept is None:
        return RollbackPlan(None, 0, 0)
    output = places.output_of(ctx.project_dir, spec)
    newer = newer_output(kept, places.committed_output(output))
    rows = places.count_rows(output, newer)
    if rows and not spec.output.idempotent and not approve:
        raise RefusedError(
            f"rolling {current.model} back to v{target.seq} restarts it from the savepoint "
            f"v{current.seq}'s deploy took: {rows} output row(s) in {len(newer)} file(s) "
            "committed since are withdrawn and their events read again, and the output is not "
            "declared idempotent; add --approve"
        )
    return RollbackPlan(restore, len(newer), rows)


def _deploy_savepoint(ctx: Context, current: Version, target: Version) -> str | None:
    """The savepoint `current` was started from when it took over from `target`."""
    for event in reversed(ctx.state.events(current.model)):
        detail = event.detail or {}
        if (
            event.kind == "takeover"
            and event.version_id == current.version_id
            and detail.get("previous") == target.version_id
        ):
            found = detail.get("restored_from")
            return str(found) if found else None
    return None


def await_release(ctx: Context, version: Version, known_events: int) -> str:
    """Follow the history after the activation of `version` (the first `known_events` events
    came before it) until the supervisor answers; what it said, or how to start the stream."""
    spec = stream_spec(version)
    if not supervised(ctx, version.model):
        return f"the stream is not running: `tidegate stream start {version.model}` starts it"
    state = ctx.state.model_state(version.model)
    if state is not None and state.paused:
        return f"the stream is paused: `tidegate unpause {version.model}` starts it"
    deadline = time.monotonic() + spec.confirm_timeout_seconds + MARGIN_SECONDS
    while time.monotonic() < deadline:
        answer = _answer(ctx.state.events(version.model)[known_events:], version)
        if answer is not None:
            if answer.kind in ("stream_start", "takeover"):
                record = ctx.state.stream(version.model)
                since = record.restored_from if record else None
                return f"took over from {since or 'nothing'}: {answer.reason}"
            raise OperationFailed(
                f"{version.model} v{version.seq} did not take over: {answer.reason}"
                + _resumed(answer)
            )
        if not supervised(ctx, version.model):
            raise OperationFailed(
                f"the supervisor of {version.model} stopped before v{version.seq} took over; "
                f"`tidegate status` says what runs, `tidegate stream start {version.model}` "
                "resumes"
            )
        time.sleep(POLL_SECONDS)
    raise OperationFailed(
        f"{version.model} v{version.seq}: no answer from its supervisor in time; "
        "`tidegate status` says what runs"
    )


def _answer(events: list[Event], version: Version) -> Event | None:
    for event in events:
        detail = event.detail or {}
        if event.kind == "takeover_failed" and detail.get("failed_version") == version.version_id:
            return event
        if event.kind in ANSWERS and event.version_id == version.version_id:
            return event
    return None


def _resumed(event: Event) -> str:
    detail = event.detail or {}
    if event.kind != "takeover_failed":
        return ""
    if detail.get("resumed"):
        return f"; v{detail.get('seq')} runs again from {detail.get('savepoint')}"
    return f"; v{detail.get('seq')} did not resume either (`tidegate status`)"


def await_pause(ctx: Context, model: str, paused: bool, timeout: float = MARGIN_SECONDS) -> str:
    """Wait for the supervisor to stop (pause) or start (unpause) the job."""
    if not supervised(ctx, model):
        return "the stream is not running"
    if ctx.state.stream(model) is None or ctx.state.active_version(model) is None:
        return "the stream has not run yet"
    wanted = SETTLED[paused]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = ctx.state.stream(model)
        if record is not None and record.state is wanted:
            if paused:
                return f"stopped with savepoint {record.savepoint}"
            return f"runs again from {record.restored_from}"
        if record is not None and record.state is StreamState.FAILED:
            raise OperationFailed(f"{model}: {record.state.value} (`tidegate status`)")
        time.sleep(POLL_SECONDS)
    raise OperationFailed(f"{model}: its supervisor did not answer in time (`tidegate status`)")
