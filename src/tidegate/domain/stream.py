"""Stream models (`kind = "flink"`): a long-running job released by savepoint.

A stream has no partitions to compute on request: one job runs, and a release replaces it. What
decides whether a new version really takes over is what the job restores from (the checkpoint
location), what it is given (credentials by name), and whether it then runs: RUNNING, a checkpoint
completed after the savepoint it started from, no restart. This module is the pure part: the
declaration, the judgment of a takeover from what was observed, the supervisor's next step from
what the ledger asks for and what runs, and which output files a restore point makes stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any


@dataclass(frozen=True)
class StreamOutput:
    """What the job writes, so tidegate can count, compare and reconcile it: a folder of files
    the job's sink commits at checkpoints (hidden, in-progress files are not output yet)."""

    path: str  # project-relative, or absolute
    format: str  # "csv"
    columns: tuple[str, ...]  # the CSV columns in order
    # replaying events into it leaves it as it was (e.g. a keyed upsert downstream): a
    # rollback that re-reads events then needs no approval
    idempotent: bool = False
    # the columns identifying a row (one event's): what validate compares rows by
    key: tuple[str, ...] = ()

    def config(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "columns": list(self.columns),
            "idempotent": self.idempotent,
            "key": list(self.key),
        }


@dataclass(frozen=True)
class StreamSpec:
    """A stream model's declaration, as a version snapshots it. The checkpoint location and the
    names of the credentials take part in the fingerprint: a job restoring from elsewhere, or
    given other credentials, is another version."""

    job: str  # "path/to/module.py:function"
    checkpoints: str  # the checkpoint and savepoint location (project-relative or absolute)
    parallelism: int
    env: tuple[str, ...]  # the variables the job is given, by name
    output: StreamOutput
    flink_version: str
    checkpoint_interval_ms: int = 1000
    # how a takeover is confirmed: this many checkpoints completed after the start, no restart,
    # within the timeout
    confirm_checkpoints: int = 2
    confirm_timeout_seconds: float = 120.0
    # restarts Flink may make before the job fails (a job that cannot run fails instead of
    # cycling RUNNING and RESTARTING forever)
    restart_attempts: int = 2

    @property
    def job_file(self) -> str:
        return self.job.rpartition(":")[0]

    @property
    def job_function(self) -> str:
        return self.job.rpartition(":")[2]

    def config(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "checkpoints": self.checkpoints,
            "parallelism": self.parallelism,
            "env": list(self.env),
            "output": self.output.config(),
            "flink": self.flink_version,
            "checkpoint_interval_ms": self.checkpoint_interval_ms,
            "confirm_checkpoints": self.confirm_checkpoints,
            "confirm_timeout_seconds": self.confirm_timeout_seconds,
            "restart_attempts": self.restart_attempts,
        }


def stream_from_config(data: Mapping[str, Any]) -> StreamSpec:
    output = data["output"]
    return StreamSpec(
        job=data["job"],
        checkpoints=data["checkpoints"],
        parallelism=int(data["parallelism"]),
        env=tuple(data["env"]),
        output=StreamOutput(
            path=output["path"],
            format=output["format"],
            columns=tuple(output["columns"]),
            idempotent=bool(output["idempotent"]),
            key=tuple(output.get("key", ())),
        ),
        flink_version=data["flink"],
        checkpoint_interval_ms=int(data["checkpoint_interval_ms"]),
        confirm_checkpoints=int(data["confirm_checkpoints"]),
        confirm_timeout_seconds=float(data["confirm_timeout_seconds"]),
        restart_attempts=int(data["restart_attempts"]),
    )


class JobStatus(str, Enum):
    """Flink's job statuses that matter here (Flink's names)."""

    INITIALIZING = "INITIALIZING"
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    SUSPENDED = "SUSPENDED"
    RECONCILING = "RECONCILING"

    @property
    def ended(self) -> bool:
        return self in (JobStatus.FAILED, JobStatus.CANCELED, JobStatus.FINISHED)


@dataclass(frozen=True)
class Observation:
    """One look at a job: its status, how often it restarted and how many checkpoints it
    completed since it started."""

    status: JobStatus
    restarts: int
    checkpoints: int
    elapsed_seconds: float


@dataclass(frozen=True)
class Takeover:
    """A judgment of a job that just started: None while it cannot be told yet."""

    confirmed: bool
    reason: str


def judge_takeover(seen: Observation, spec: StreamSpec) -> Takeover | None:
    """Whether a job that started from a restore point has taken over. A restart is a failure
    (a job that restarts as it starts is a crash loop, whatever it does next); so is an ended
    job, or no confirmation within the timeout."""
    if seen.status.ended:
        return Takeover(False, f"the job {seen.status.value.lower()} as it started")
    if seen.restarts > 0 or seen.status in (JobStatus.RESTARTING, JobStatus.FAILING):
        return Takeover(False, f"the job restarted {max(seen.restarts, 1)} time(s) as it started")
    wanted = spec.confirm_checkpoints
    if seen.status is JobStatus.RUNNING and seen.checkpoints >= wanted:
        return Takeover(True, f"RUNNING, {seen.checkpoints} checkpoint(s) completed, no restart")
    if seen.elapsed_seconds >= spec.confirm_timeout_seconds:
        return Takeover(
            False,
            f"not confirmed within {spec.confirm_timeout_seconds:g}s ({seen.status.value}, "
            f"{seen.checkpoints} of {wanted} checkpoint(s))",
        )
    return None


class StreamState(str, Enum):
    """What the ledger says of a stream's job."""

    STARTING = "starting"  # a version is starting, not yet confirmed
    RUNNING = "running"  # confirmed: RUNNING and checkpointing
    HANDOVER = "handover"  # the running version stopped with a savepoint; the next one starts
    STOPPED = "stopped"  # stopped with a savepoint (paused, or `stream stop`)
    FAILED = "failed"  # the job failed; it restarts from its newest restore point


@dataclass(frozen=True)
class StreamRecord:
    """The ledger's row of a stream: which version runs (or ran), from which restore point,
    as which Flink job, under which supervisor."""

    model: str
    version_id: str
    state: StreamState
    job_id: str | None
    # what the job started from (a savepoint or checkpoint path; None: from nothing)
    restored_from: str | None
    # the newest savepoint tidegate took of this stream, and the newest completed checkpoint
    savepoint: str | None
    checkpoint: str | None
    checkpoints: int  # completed since the job started
    supervisor_pid: int | None
    supervisor_host: str | None
    heartbeat_at: str | None
    updated_at: str
    # the version a handover replaces (HANDOVER, or STARTING after one)
    previous_version_id: str | None = None
    # the running job's REST API and web UI (a MiniCluster of the supervisor's process)
    address: str | None = None


class Step(str, Enum):
    """What a supervisor does next."""

    START = "start"  # nothing runs and the stream is not paused: start the active version
    HANDOVER = "handover"  # another version is active: stop with a savepoint, start it
    STOP = "stop"  # the stream is paused: stop with a savepoint
    WATCH = "watch"  # the active version runs: record its checkpoints


def next_step(running: str | None, active: str | None, paused: bool) -> Step:
    """The supervisor's next step from which version runs in it and what the ledger asks."""
    if running is None:
        return Step.WATCH if paused or active is None else Step.START
    if paused:
        return Step.STOP
    if active is not None and active != running:
        return Step.HANDOVER
    return Step.WATCH


def newer_output(at_restore_point: Iterable[str], now: Iterable[str]) -> list[str]:
    """Output files committed after a restore point was taken: restoring it re-reads the events
    they hold, so they must leave the output first or their rows would be counted twice."""
    kept = set(at_restore_point)
    return sorted(path for path in now if path not in kept)


@dataclass(frozen=True)
class Comparison:
    """A new version's output rows against the running version's rows of the same events
    (matched by the declared key), on the columns both have."""

    compared: int  # rows of the new version whose key the running version wrote too
    unmatched: int  # rows whose key the running version has not written (yet)
    differing: tuple[tuple[str, str, str, str], ...]  # (key, column, running, new), all of them
    columns: tuple[str, ...]  # the columns compared

    @property
    def agrees(self) -> bool:
        return self.compared > 0 and not self.differing

    def describe(self, against: str, shown: int = 3) -> str:
        """How it went, against the running version (`against` names it)."""
        if not self.compared:
            return (
                f"no row to compare with {against}'s: it has not written the same events "
                f"({self.unmatched} row(s) of the new version unmatched)"
            )
        if not self.differing:
            return f"{self.compared} row(s) equal {against}'s on {', '.join(self.columns)}"
        examples = "; ".join(
            f"{key} {column}: {old!r} → {new!r}" for key, column, old, new in self.differing[:shown]
        )
        return (
            f"{len(self.differing)} value(s) differ from {against}'s in {self.compared} row(s) "
            f"compared: {examples}"
        )


def compare_rows(
    new_rows: Iterable[Sequence[str]],
    new_columns: Sequence[str],
    running_rows: Mapping[tuple[str, ...], Sequence[str]],
    running_columns: Sequence[str],
    key: Sequence[str],
) -> Comparison:
    """Compare rows of the new version with the running version's rows by key (the running
    rows already indexed by their key), on the columns both declare."""
    shared = tuple(c for c in new_columns if c in running_columns and c not in key)
    at_new = {c: i for i, c in enumerate(new_columns)}
    at_running = {c: i for i, c in enumerate(running_columns)}
    compared = unmatched = 0
    differing: list[tuple[str, str, str, str]] = []
    for row in new_rows:
        identity = tuple(row[at_new[c]] for c in key)
        found = running_rows.get(identity)
        if found is None:
            unmatched += 1
            continue
        compared += 1
        for column in shared:
            old, new = found[at_running[column]], row[at_new[column]]
            if old != new:
                differing.append((",".join(identity), column, old, new))
    return Comparison(compared, unmatched, tuple(differing), shared)
