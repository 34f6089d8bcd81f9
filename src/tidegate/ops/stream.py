"""The supervisor of a stream model (`tidegate stream start MODEL`): it runs the deployed version
of a Flink job on a MiniCluster of its own process and keeps it where the ledger says.

It reconciles, as a Kubernetes operator does: what runs against what the ledger asks (the
active version, paused or not). A new active version (a deploy or a rollback) is handed over:
the running job stops with a savepoint, the new version starts from it and must take over
(RUNNING, checkpoints completed after its start, no restart) within its timeout, or the previous
version starts again from the same savepoint and the ledger's active version is set back. A
pause stops the job with a savepoint; unpausing starts it from there. Every step is a row of
`streams` and an event of the model's history, so after a crash (of the job, or of this process)
`status` says which version ran from which restore point, and the next supervisor resumes from
the newest one: the last job's newest checkpoint, else the savepoint it was handed.

Starting from a savepoint re-reads the events that arrived after it. The output the sink
committed after that savepoint (known from the manifest kept beside it) is therefore withdrawn
first, so that no event is counted twice; starting from a checkpoint needs none (the sink commits
exactly what the checkpoint holds).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from threading import Event as Flag

from tidegate.domain.clock import stamp
from tidegate.domain.errors import ModelError, OperationFailed, UsageError
from tidegate.domain.model import Version
from tidegate.domain.stream import (
    JobStatus,
    Observation,
    Step,
    StreamRecord,
    StreamSpec,
    StreamState,
    Takeover,
    judge_takeover,
    newer_output,
    next_step,
)
from tidegate.flink import places
from tidegate.flink.runtime import JobLost, Launch, RunningJob, start
from tidegate.ops.context import Context
from tidegate.ops.stream_lock import claimed
from tidegate.state.base import Event

POLL_SECONDS = 0.25
HEARTBEAT_SECONDS = 2.0


def stream_spec(version: Version) -> StreamSpec:
    if version.spec.stream is None:
        raise UsageError(f'{version.model} is not a stream model (kind = "flink")')
    return version.spec.stream


def confirm(job: RunningJob, spec: StreamSpec, began: float) -> Takeover:
    """Watch a job that just started until it can be judged (domain/stream.judge_takeover):
    restarts are seen in its status as well as in Flink's count, which lags."""
    restarted = 0
    while True:
        status = job.status()
        metrics = None if status.ended else job.metrics()
        if status is JobStatus.RESTARTING:
            restarted = max(restarted, 1)
        seen = Observation(
            status=status,
            restarts=max(restarted, metrics.restarts if metrics else 0),
            checkpoints=metrics.completed_checkpoints if metrics else 0,
            elapsed_seconds=time.monotonic() - began,
        )
        judged = judge_takeover(seen, spec)
        if judged is not None:
            cause = None if judged.confirmed else job.failure()
            return Takeover(False, f"{judged.reason}: {cause}") if cause else judged
        time.sleep(POLL_SECONDS)


def launch_of(
    root: Path, version: Version, restore: str | None, output: Path, checkpoints: Path
) -> Launch:
    """How `version` starts from `restore`, writing `output`, checkpointing into
    `checkpoints`."""
    spec = stream_spec(version)
    return Launch(
        workdir=root.resolve(),
        code=places.code_of(root, version),
        module=places.module_of(spec.job_file),
        function=spec.job_function,
        name=f"{version.model} v{version.seq}",
        output=output,
        checkpoints=checkpoints,
        restore=restore,
        parallelism=spec.parallelism,
        checkpoint_interval_ms=spec.checkpoint_interval_ms,
        restart_attempts=spec.restart_attempts,
    )


def missing_credentials(spec: StreamSpec) -> list[str]:
    """The variables the job names that are not set here: it does not start without them."""
    return [name for name in spec.env if name not in os.environ]


@dataclass
class Running:
    version: Version
    job: RunningJob
    record: StreamRecord


class Supervisor:
    """One stream model's job in this process, kept as the ledger asks."""

    def __init__(self, ctx: Context, model: str, say: Callable[[str], None]) -> None:
        self.ctx = ctx
        self.model = model
        self.say = say
        self.running: Running | None = None
        self.failed: str | None = None
        self._beat = 0.0

    # the loop
    def run(self, stopping: Flag) -> None:
        with claimed(self.ctx, self.model):
            self.say(f"supervising {self.model}: it runs its deployed version, when there is one")
            try:
                while not stopping.is_set() and self.failed is None:
                    self.tick()
                    stopping.wait(POLL_SECONDS)
            except JobLost as lost:
                self.lost(str(lost))
            finally:
                if self.running is not None:
                    self.stop(StreamState.STOPPED, "the supervisor stopped")
        if self.failed is not None:
            raise OperationFailed(self.failed)

    def tick(self) -> None:
        state = self.ctx.state.model_state(self.model)
        active = state.active_version if state else None
        paused = bool(state and state.paused)
        running = self.running.version.version_id if self.running else None
        step = next_step(running, active, paused)
        if step is Step.START:
            assert active is not None
            self.resume(self._version(active))
        elif step is Step.HANDOVER:
            assert active is not None
            self.handover(self._version(active))
        elif step is Step.STOP:
            self.stop(StreamState.STOPPED, "paused")
        else:
            self.watch()

    # the steps
    def resume(self, version: Version) -> None:
        """Start the active version where the stream left off."""
        record = self.ctx.state.stream(self.model)
        spec = stream_spec(version)
        restore = places.restore_point(record, places.checkpoints_of(self.ctx.project_dir, spec))
        judged = self.start(version, restore, record.version_id if record else None)
        if not judged.confirmed:
            self.failed = (
                f"{self.model} v{version.seq} did not start: {judged.reason}; "
                "`tidegate stream start` tries again from the same restore point"
            )

    def handover(self, version: Version) -> None:
        """Stop the running version with a savepoint, start `version` from it (or from the
        savepoint a rollback names); back to the running version if it does not take over."""
        assert self.running is not None
        previous = self.running.version
        savepoint = self.stop(StreamState.HANDOVER, f"handing over to v{version.seq}", version)
        restore = self._asked_restore(version) or savepoint
        judged = self.start(version, restore, previous.version_id, handing_over=True)
        if judged.confirmed:
            return
        self.say(f"v{version.seq} did not take over ({judged.reason}); v{previous.seq} resumes")
        back = self.start(previous, savepoint, version.version_id)
        at = stamp(self.ctx.clock)
        self.ctx.state.activate(
            self.model,
            previous.version_id,
            at,
            Event(
                kind="takeover_failed",
                actor=self.ctx.actor,
                at=at,
                model=self.model,
                version_id=previous.version_id,
                reason=judged.reason,
                detail={
                    "failed_version": version.version_id,
                    "seq": previous.seq,
                    "savepoint": savepoint,
                    "resumed": back.confirmed,
                },
            ),
        )
        if not back.confirmed:
            self.failed = f"v{previous.seq} did not resume either: {back.reason}"

    def start(
        self,
        version: Version,
        restore: str | None,
        previous: str | None,
        handing_over: bool = False,
    ) -> Takeover:
        """Start `version` from `restore` and judge whether it takes over; the record and the
        history say how it went (a failed handover's event is the handover's to record)."""
        spec = stream_spec(version)
        root = self.ctx.project_dir
        output = places.output_of(root, spec)
        withdrawn = self._withdraw(spec, restore, output)
        missing = missing_credentials(spec)
        record = self._starting(version, restore, previous)
        self.ctx.state.save_stream(record)
        if missing:
            return self._refused(record, f"{', '.join(missing)} not set here", handing_over)
        self.say(f"starting {self.model} v{version.seq} from {restore or 'nothing'}")
        began = time.monotonic()
        try:
            job = start(
                launch_of(root, version, restore, output, places.checkpoints_of(root, spec))
            )
        except ModelError as error:
            return self._refused(record, str(error), handing_over)
        record = replace(record, job_id=job.job_id, address=job.address)
        self.ctx.state.save_stream(record)
        judged = confirm(job, spec, began)
        if not judged.confirmed:
            job.cancel()
            return self._refused(record, judged.reason, handing_over, job.job_id)
        metrics = job.metrics()
        record = replace(
            record,
            state=StreamState.RUNNING,
            checkpoint=metrics.latest_checkpoint,
            checkpoints=metrics.completed_checkpoints,
            updated_at=stamp(self.ctx.clock),
        )
        kind = "takeover" if handing_over else "stream_start"
        self.ctx.state.save_stream(
            record,
            self._event(
                kind,
                version,
                judged.reason,
                {
                    "job_id": job.job_id,
                    "restored_from": restore,
                    "previous": previous,
                    "withdrawn_files": len(withdrawn),
                },
            ),
        )
        self.running = Running(version, job, record)
        self.say(f"{self.model} v{version.seq} runs: {judged.reason} ({job.address})")
        return judged

    def stop(self, state: StreamState, why: str, next_version: Version | None = None) -> str:
        """Stop the running job with a savepoint, the output committed then kept beside it."""
        assert self.running is not None
        running = self.running
        spec = stream_spec(running.version)
        root = self.ctx.project_dir
        savepoint = places.plain_path(
            running.job.stop_with_savepoint(places.savepoints_of(root, spec))
        )
        places.keep_manifest(savepoint, places.committed_output(places.output_of(root, spec)))
        self.running = None
        record = replace(
            running.record,
            state=state,
            savepoint=savepoint,
            updated_at=stamp(self.ctx.clock),
            heartbeat_at=stamp(self.ctx.clock),
        )
        if next_version is not None:
            record = replace(
                record,
                version_id=next_version.version_id,
                previous_version_id=running.version.version_id,
                job_id=None,
            )
        self.ctx.state.save_stream(
            record,
            self._event(
                "savepoint",
                running.version,
                why,
                {"savepoint": savepoint, "job_id": running.record.job_id},
            ),
        )
        self.say(f"{self.model} v{running.version.seq} stopped with savepoint {savepoint} ({why})")
        return savepoint

    def watch(self) -> None:
        """Record the running job's checkpoints; a job that failed is recorded as failed."""
        now = time.monotonic()
        if self.running is None:
            return
        job = self.running.job
        status: JobStatus = job.status()
        if status.ended:
            seq = self.running.version.seq
            self.lost(f"{self.model} v{seq}'s job failed: {job.failure() or status.value}")
            return
        if now - self._beat < HEARTBEAT_SECONDS:
            return
        self._beat = now
        metrics = job.metrics()
        record = replace(
            self.running.record,
            checkpoint=metrics.latest_checkpoint or self.running.record.checkpoint,
            checkpoints=metrics.completed_checkpoints,
            heartbeat_at=stamp(self.ctx.clock),
        )
        self.running.record = record
        self.ctx.state.save_stream(record)

    def lost(self, why: str) -> None:
        """The job stopped answering: recorded as failed; the next supervisor resumes it from
        its newest checkpoint."""
        if self.running is not None:
            record = replace(
                self.running.record, state=StreamState.FAILED, updated_at=stamp(self.ctx.clock)
            )
            version, self.running = self.running.version, None
            self.ctx.state.save_stream(
                record, self._event("stream_failed", version, why, {"job_id": record.job_id})
            )
        self.failed = (
            f"{why}; `tidegate stream start {self.model}` resumes from the newest checkpoint"
        )

    # helpers
    def _refused(
        self, record: StreamRecord, reason: str, handing_over: bool, job_id: str | None = None
    ) -> Takeover:
        version = self._version(record.version_id)
        failed = replace(record, state=StreamState.FAILED, updated_at=stamp(self.ctx.clock))
        detail: dict[str, object] = {"job_id": job_id, "restored_from": record.restored_from}
        self.ctx.state.save_stream(
            failed, None if handing_over else self._event("stream_failed", version, reason, detail)
        )
        self.say(f"{self.model} v{version.seq} did not take over: {reason}")
        return Takeover(False, reason)

    def _withdraw(self, spec: StreamSpec, restore: str | None, output: Path) -> list[str]:
        """Output committed after the savepoint the job restores: withdrawn before it starts
        (its events are read again)."""
        kept = places.manifest_of(restore) if restore else None
        if kept is None:
            return []
        newer = newer_output(kept, places.committed_output(output))
        if newer:
            into = places.withdrawn_of(self.ctx.project_dir, spec) / _folder_stamp(self.ctx)
            places.withdraw(output, newer, into)
            self.say(f"withdrew {len(newer)} output file(s) committed after {restore} to {into}")
        return newer

    def _asked_restore(self, version: Version) -> str | None:
        """The savepoint the event that made `version` active names (a rollback's)."""
        for event in reversed(self.ctx.state.events(self.model)):
            if event.kind in ("deploy", "rollback") and event.version_id == version.version_id:
                found = (event.detail or {}).get("restore")
                return str(found) if found else None
        return None

    def _starting(
        self, version: Version, restore: str | None, previous: str | None
    ) -> StreamRecord:
        """The row of `version` starting from `restore` (the newest savepoint kept)."""
        known = self.ctx.state.stream(self.model)
        at = stamp(self.ctx.clock)
        return StreamRecord(
            model=self.model,
            version_id=version.version_id,
            state=StreamState.STARTING,
            job_id=None,
            restored_from=restore,
            savepoint=known.savepoint if known else None,
            checkpoint=None,
            checkpoints=0,
            supervisor_pid=os.getpid(),
            supervisor_host=socket.gethostname(),
            heartbeat_at=at,
            updated_at=at,
            previous_version_id=previous,
        )

    def _event(self, kind: str, version: Version, reason: str, detail: dict[str, object]) -> Event:
        return Event(
            kind=kind,
            actor=self.ctx.actor,
            at=stamp(self.ctx.clock),
            model=self.model,
            version_id=version.version_id,
            reason=reason,
            detail={"seq": version.seq, **detail},
        )

    def _version(self, version_id: str) -> Version:
        found = self.ctx.state.get_version(version_id)
        assert found is not None, "the ledger keeps every version it activated"
        return found


def _folder_stamp(ctx: Context) -> str:
    """Now, as a folder name (no colons)."""
    return stamp(ctx.clock).replace(":", "").replace("+0000", "Z")
