"""Jobs of command and dbt models left running by a tidegate that was killed outright (no
Ctrl-C, no finally): the next writer of the project stops them and removes the folders they
wrote into. It holds the warehouse, so no other tidegate process of the project runs a job."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path

from tidegate.domain.clock import Clock, stamp
from tidegate.domain.command import CommandRecord
from tidegate.execution.command import STAGING_DIR
from tidegate.state.base import StateStore


def stop_orphaned_jobs(state: StateStore, root: Path, clock: Clock) -> None:
    """Kill the process group of every job recorded as running that is still alive; record
    those jobs as ended; remove what every earlier run left in the staging folder."""
    unfinished = state.unfinished_commands()
    for record in unfinished.values():
        _stop(record)
    if unfinished:
        state.end_commands(sorted(unfinished), stamp(clock))
    shutil.rmtree(root / STAGING_DIR, ignore_errors=True)


def _stop(record: CommandRecord) -> None:
    """Kill the job's process group if its process is still this job: a process id is reused,
    so it must carry the output folder tidegate gave the job in its environment."""
    if record.pid is None or not _is_job(record.pid, record.environment.get("TIDEGATE_OUTPUT")):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(record.pid, signal.SIGKILL)


def _is_job(pid: int, output: str | None) -> bool:
    if output is None:
        return False
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"TIDEGATE_OUTPUT={output}".encode() in environ.split(b"\0")
