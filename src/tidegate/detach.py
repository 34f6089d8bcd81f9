"""`--detach`: a long command started in a background process of its own, which tells the
starting one its run id once the run is recorded; the starting one prints it and returns, and
`tidegate show run RUN` follows the run from then on.

The background process runs the same command line without `--detach`, in a session of its own
(a closed terminal does not stop it), its output in `.tidegate/detached/RUN.log`. Whatever it
refuses before its run exists (a paused model, a busy warehouse, a bad range) is the starting
command's own error and exit code: nothing is left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from tidegate.domain.clock import Clock, stamp
from tidegate.domain.errors import TidegateError

# the descriptor a detached process writes its run id to, inherited from the starting one
RUN_ID_FD = "TIDEGATE_DETACHED_FD"
LOGS = Path(".tidegate") / "detached"


@dataclass(frozen=True)
class Detached:
    run_id: str
    pid: int
    log: Path


class DetachedFailed(TidegateError):
    """The background process ended before its run was recorded: its own error and exit
    code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def command_line(context: click.Context, drop: frozenset[str]) -> list[str]:
    """The command being run, as arguments of `tidegate` (its path after the program, then
    its parameters as parsed), without the parameters named in `drop`."""
    words = context.command_path.split()[1:]
    for param in context.command.params:
        value = context.params.get(param.name or "")
        if param.name in drop or value is None or value is False:
            continue
        if isinstance(param, click.Argument):
            words.append(str(value))
        elif isinstance(param, click.Option) and param.is_flag:
            words.append(param.opts[0])
        else:
            words += [param.opts[0], str(value)]
    return words


def start(arguments: list[str], project: Path, clock: Clock) -> Detached:
    """Run `tidegate ARGUMENTS` in the background; return once it recorded its run."""
    logs = project / LOGS
    logs.mkdir(parents=True, exist_ok=True)
    pending = logs / f"starting-{stamp(clock).replace(':', '')}-{os.getpid()}.log"
    read_end, write_end = os.pipe()
    try:
        with pending.open("wb") as output:
            child = subprocess.Popen(
                [sys.executable, "-m", "tidegate", *arguments],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                pass_fds=(write_end,),
                env={**os.environ, RUN_ID_FD: str(write_end)},
                start_new_session=True,
            )
    finally:
        os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as told:
        try:
            # the child's end closes when it wrote its run id, or when it exits
            run_id = told.read().strip()
        except KeyboardInterrupt:
            # Ctrl-C before the run started: the background process goes too (it stops as a
            # backfill stops on Ctrl-C)
            child.send_signal(signal.SIGINT)
            child.wait()
            raise
    if not run_id:
        code = child.wait()
        message = _last_error(pending) or f"the background process exited with code {code}"
        pending.unlink(missing_ok=True)
        raise DetachedFailed(message, code or 1)
    log = logs / f"{run_id}.log"
    pending.rename(log)  # the child keeps writing to it under its new name
    return Detached(run_id, child.pid, log)


def tell_run_id(run_id: str) -> None:
    """In a detached process: hand the run id to the starting process (once)."""
    descriptor = os.environ.pop(RUN_ID_FD, None)
    if descriptor is None:
        return
    with os.fdopen(int(descriptor), "w", encoding="utf-8") as pipe:
        pipe.write(run_id)


def _last_error(log: Path) -> str | None:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    errors = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    return errors[-1] if errors else None
