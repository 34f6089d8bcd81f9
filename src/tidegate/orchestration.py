"""Calling tidegate from an orchestrator: one command in a process of its own, the one result
document it prints, and what its run published. The Airflow and Dagster integrations map this
onto their own concepts (task outcomes, asset events, materializations); all judgment stays in
the command. Imports neither orchestrator, nor anything heavy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# the exit codes of docs/reference/exit-codes.md
SUCCEEDED = 0
FAILED = 1  # worth retrying
USAGE = 2  # a mistake in the call: retrying repeats it
REFUSED = 3  # a paused model, a failed gate, a judgment that needs approval
BUSY = 4  # another writer holds the model: retry later
STOPPED = 5  # stopped on request

COMMANDS = ("run", "backfill", "rerun", "recover")
# worth another try: a failure (a broken source, a lost connection) and a busy model (another
# writer holds it). Not a usage error or a refusal (the same call is refused again), nor a stop
# (someone asked the run to stop; `tidegate backfill resume` continues it, on purpose).
RETRYABLE = frozenset({FAILED, BUSY})


class OrchestrationError(Exception):
    """tidegate could not be called, or printed no result document."""


@dataclass(frozen=True)
class Invocation:
    """One tidegate command for one model: `tidegate COMMAND MODEL [range] OPTIONS --json`."""

    command: str
    model: str
    partitions: str | None = None  # a partition or START..END in the model's grain
    project: Path = Path(".")
    options: tuple[str, ...] = ()  # further flags, e.g. ("--batch-size", "7")

    def __post_init__(self) -> None:
        if self.command not in COMMANDS:
            raise ValueError(f"command must be one of {', '.join(COMMANDS)}: {self.command!r}")
        if self.command == "run" and self.partitions is None:
            return
        if self.command != "recover" and self.partitions is None:
            raise ValueError(f"`{self.command}` needs partitions")

    def arguments(self) -> list[str]:
        """The command line after the executable."""
        flag = "--partition" if self.command == "run" else "--partitions"
        selected = [] if self.partitions is None else [flag, self.partitions]
        project = ["--project", str(self.project)]
        return [self.command, self.model, *selected, *self.options, *project, "--json"]


@dataclass(frozen=True)
class PublishedPartition:
    """A partition a run published: what it holds and what its checks said."""

    model: str
    partition: str
    version_id: str
    rows: int | None
    checksum: str | None
    attempt_id: str
    failed_checks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """What a command did: its exit code and the one document it printed on stdout."""

    exit_code: int
    document: Mapping[str, Any] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.exit_code == SUCCEEDED

    @property
    def retryable(self) -> bool:
        return self.exit_code in RETRYABLE

    @property
    def run_id(self) -> str | None:
        found = self.document.get("run_id")
        return found if isinstance(found, str) else None

    @property
    def reason(self) -> str:
        """Why it did not succeed, in one line (empty when it did)."""
        if self.succeeded:
            return ""
        for key in ("error", "reason"):
            found = self.document.get(key)
            if isinstance(found, str) and found:
                return found
        return f"tidegate exited {self.exit_code}"


def executable() -> list[str]:
    """How to start tidegate: the `tidegate` script beside this interpreter, on PATH, or the
    module under this interpreter."""
    beside = Path(sys.executable).parent / "tidegate"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("tidegate")
    return [found] if found else [sys.executable, "-m", "tidegate"]


def call(
    arguments: Sequence[str],
    *,
    program: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Outcome:
    """Run `tidegate ARGUMENTS` (which must ask for --json) and read its one result document.
    stderr (the human progress, or `--events jsonl`) is passed through to ours, so that an
    orchestrator's task log shows it."""
    command = [*(program or executable()), *arguments]
    environment = {**os.environ, **(env or {})}
    try:
        done = subprocess.run(
            command, stdout=subprocess.PIPE, text=True, env=environment, timeout=timeout
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise OrchestrationError(f"calling tidegate failed: {error}") from None
    return Outcome(done.returncode, _document(done.stdout, done.returncode))


def invoke(
    invocation: Invocation,
    *,
    program: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Outcome:
    """Run one command for one model."""
    return call(invocation.arguments(), program=program, env=env, timeout=timeout)


def run_document(
    run_id: str,
    project: Path,
    *,
    program: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Mapping[str, Any]:
    """`tidegate show run RUN --json`: the run, its status and every attempt (the poll of a
    detached run)."""
    shown = call(
        ["show", "run", run_id, "--project", str(project), "--json"], program=program, env=env
    )
    if not shown.succeeded:
        raise OrchestrationError(f"reading run {run_id} failed: {shown.reason}")
    return shown.document


def published(run: Mapping[str, Any]) -> list[PublishedPartition]:
    """The partitions a run (its `show run` document) published, one per model and partition:
    the last published attempt of each."""
    found: dict[tuple[str, str], PublishedPartition] = {}
    for attempt in run.get("attempts", ()):
        if attempt.get("state") != "published":
            continue
        key = (attempt["model"], attempt["partition"])
        found[key] = PublishedPartition(
            model=attempt["model"],
            partition=attempt["partition"],
            version_id=attempt["version_id"],
            rows=attempt.get("rows"),
            checksum=attempt.get("checksum"),
            attempt_id=attempt["attempt_id"],
            failed_checks=tuple(attempt.get("failed_checks") or ()),
        )
    return list(found.values())


def _document(stdout: str, exit_code: int) -> Mapping[str, Any]:
    try:
        document = json.loads(stdout)
    except json.JSONDecodeError:
        raise OrchestrationError(
            f"tidegate exited {exit_code} without a result document on stdout"
        ) from None
    if not isinstance(document, dict):
        raise OrchestrationError(f"tidegate exited {exit_code}; its output is not a document")
    return document
