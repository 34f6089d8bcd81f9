"""Validating a stream version: start it, in this process, from the running stream's newest
restore point (a checkpoint its job completed, or the savepoint it stopped with) into a shadow
output and shadow checkpoints, and judge it as a takeover is judged — every operator's state
mapped (a renamed `uid` is refused, never dropped), RUNNING through the declared checkpoints,
no restart (a state whose type changed fails as the job reads it) — then cancel it and record a
gate. Production is untouched: the running job keeps its checkpoint (Flink restores one without
claiming it), and nothing is written to its output."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from tidegate.domain.clock import stamp
from tidegate.domain.errors import ModelError, OperationFailed
from tidegate.domain.gate import Gate, is_flaky
from tidegate.domain.ids import new_gate_id
from tidegate.domain.model import Version
from tidegate.domain.partitions import WHOLE_LABEL
from tidegate.domain.stream import Comparison, JobStatus, StreamState, Takeover, compare_rows
from tidegate.flink import places
from tidegate.flink.rest import trigger_savepoint
from tidegate.flink.runtime import SAVEPOINT_TIMEOUT_SECONDS, RunningJob, start
from tidegate.ops.context import Context
from tidegate.ops.stream import (
    POLL_SECONDS,
    confirm,
    launch_of,
    missing_credentials,
    stream_spec,
)
from tidegate.ops.stream_lock import supervised
from tidegate.ops.validate import recorded

# a file holding events the shadow read may have been last written just before the validation
RECENT_MARGIN_SECONDS = 5.0
# how long the running version may lag behind the shadow's output
COMPARE_WAIT_SECONDS = 15.0


def validate_stream(ctx: Context, version: Version) -> Gate:
    root = ctx.project_dir
    began = time.time()
    restore, running = _restore_point(ctx, version)
    shadow = places.shadow_of(root, version)
    shutil.rmtree(shadow, ignore_errors=True)
    output, checkpoints = shadow / "output", shadow / "checkpoints"
    judged, rows = _shadow_run(ctx, version, restore, output, checkpoints)
    if judged.confirmed and running is not None:
        compared = _compared(ctx, version, running, output, began)
        if compared is not None:
            judged = Takeover(
                compared.agrees, f"{judged.reason}; {compared.describe(f'v{running.seq}')}"
            )
    summary = (
        f"started from {restore or 'nothing'}: {judged.reason}"
        if judged.confirmed
        else f"did not take over from {restore or 'nothing'}: {judged.reason}"
    )
    gate_id = new_gate_id()
    gate = Gate(
        gate_id=gate_id,
        model=version.model,
        version_id=version.version_id,
        passed=judged.confirmed,
        flaky=is_flaky(
            ctx.state.gates(version.model), version.version_id, restore or "", judged.confirmed
        ),
        inputs=restore or "",
        partitions=(WHOLE_LABEL,),
        report={
            "seq": version.seq,
            "shadow_table": str(output),
            "restored_from": restore,
            "summary": summary,
            "partitions": [
                {
                    "partition": WHOLE_LABEL,
                    "state": "passed" if judged.confirmed else "failed",
                    "rows": rows,
                    "checksum": None,
                    "reason": judged.reason,
                    "checks": [],
                    "reconciliations": [],
                }
            ],
            "diff": None,
        },
        actor=ctx.actor,
        created_at=stamp(ctx.clock),
    )
    return recorded(ctx, gate)


def _restore_point(ctx: Context, version: Version) -> tuple[str | None, Version | None]:
    """A running stream's state now, as a savepoint taken through its job's REST API (its
    checkpoints are Flink's to delete as newer ones complete), with the version running; a
    stopped or dead one's restore point."""
    spec = stream_spec(version)
    record = ctx.state.stream(version.model)
    if (
        record is None
        or record.state is not StreamState.RUNNING
        or record.address is None
        or record.job_id is None
        or not supervised(ctx, version.model)
    ):
        return places.restore_point(record, places.checkpoints_of(ctx.project_dir, spec)), None
    running = ctx.state.get_version(record.version_id)
    try:
        return trigger_savepoint(
            record.address,
            record.job_id,
            places.savepoints_of(ctx.project_dir, spec),
            SAVEPOINT_TIMEOUT_SECONDS,
        ), running
    except (OSError, RuntimeError, KeyError, ValueError) as error:
        raise OperationFailed(
            f"{version.model}: no savepoint of the running job to validate from ({error})"
        ) from None


def _compared(
    ctx: Context, version: Version, running: Version, output: Path, began: float
) -> Comparison | None:
    """The shadow's rows against the running version's rows of the same events, when the
    output declares a key (domain/stream.compare_rows); the running version may be a moment
    behind, so its output is read again until it holds every key the shadow wrote, or the
    wait is over."""
    spec, theirs = stream_spec(version), stream_spec(running)
    if not spec.output.key or not set(spec.output.key) <= set(theirs.output.columns):
        return None
    key = spec.output.key
    mine = list(places.csv_rows(output, places.committed_output(output), len(spec.output.columns)))
    wanted = {tuple(row[spec.output.columns.index(c)] for c in key) for row in mine}
    at = [theirs.output.columns.index(c) for c in key]
    production = places.output_of(ctx.project_dir, theirs)
    deadline = time.monotonic() + COMPARE_WAIT_SECONDS
    while True:
        # files written since the validation began hold the events the shadow read too
        recent = places.committed_since(production, began - RECENT_MARGIN_SECONDS)
        indexed = {
            identity: row
            for row in places.csv_rows(production, recent, len(theirs.output.columns))
            if (identity := tuple(row[i] for i in at)) in wanted
        }
        found = compare_rows(mine, spec.output.columns, indexed, theirs.output.columns, key)
        if not found.unmatched or time.monotonic() >= deadline:
            return found
        time.sleep(POLL_SECONDS)


def _shadow_run(
    ctx: Context, version: Version, restore: str | None, output: Path, checkpoints: Path
) -> tuple[Takeover, int | None]:
    spec = stream_spec(version)
    missing = missing_credentials(spec)
    if missing:
        return Takeover(False, f"{', '.join(missing)} not set here"), None
    began = time.monotonic()
    try:
        job = start(launch_of(ctx.project_dir, version, restore, output, checkpoints))
    except ModelError as error:
        return Takeover(False, str(error)), None
    try:
        judged = confirm(job, spec, began)
        rows = _output_rows(job, output, began + spec.confirm_timeout_seconds)
        if judged.confirmed:
            judged = _still_running(job) or judged
    finally:
        job.cancel()
    if judged.confirmed and rows == 0:
        judged = Takeover(
            False,
            f"{judged.reason}, but no event arrived to exercise its state (no output in "
            f"{spec.confirm_timeout_seconds:g}s); validate again while input flows",
        )
    return judged, rows


def _still_running(job: RunningJob) -> Takeover | None:
    """A failure seen after the takeover was confirmed (as the first events read the state)."""
    status = job.status()
    if status.ended:
        return Takeover(False, f"the job failed as events arrived: {job.failure() or status.value}")
    restarts = job.metrics().restarts
    if status is JobStatus.RESTARTING or restarts:
        cause = job.failure()
        return Takeover(
            False,
            f"the job restarted {max(restarts, 1)} time(s) as events arrived"
            + (f": {cause}" if cause else ""),
        )
    return None


def _output_rows(job: RunningJob, output: Path, deadline: float) -> int:
    """The rows the shadow job committed, once it committed some (a state of another type
    fails only when an event reads it), or at the deadline."""
    while True:
        rows = places.count_rows(output, places.committed_output(output))
        if rows or time.monotonic() >= deadline or job.status().ended:
            return rows
        time.sleep(POLL_SECONDS)
