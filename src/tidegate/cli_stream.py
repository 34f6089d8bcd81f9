"""`tidegate stream start | stop`: the supervisor of a stream model (kind = "flink")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from tidegate.cli import Argument, common, emit
from tidegate.domain.errors import OperationFailed, UsageError
from tidegate.project.flink_model import INSTALL_HINT, installed_flink
from tidegate.terminal import echo

# how long `--detach` and `stop` wait for the supervisor to answer
ANSWER_SECONDS = 120.0
POLL_SECONDS = 0.2


@click.group()
def stream() -> None:
    """Run and stop the supervisor of a stream model (kind = "flink")."""


def _document(ctx: Any, model: str, pid: int | None, log: Path | None) -> dict[str, Any]:
    record = ctx.state.stream(model)
    return {
        "schema": "tidegate.stream/v1",
        "model": model,
        "state": record.state.value if record else None,
        "version_id": record.version_id if record else None,
        "job_id": record.job_id if record else None,
        "savepoint": record.savepoint if record else None,
        "pid": pid,
        "log": str(log) if log else None,
    }


def _stream_model(ctx: Any, model: str) -> Any:
    spec = ctx.project.model(model)
    if spec.stream is None:
        raise UsageError(f'{model} is not a stream model (kind = "flink")')
    return spec


@stream.command()
@click.argument("model", cls=Argument, help="The stream model to supervise.")
@click.option("--detach", is_flag=True, help="Run the supervisor in the background; print its pid.")
@common
def start(ctx: Any, as_json: bool, model: str, detach: bool) -> None:
    """Supervise MODEL: run its deployed version on a local Flink MiniCluster, carry out
    deploys, rollbacks and pauses, stop with a savepoint on SIGTERM or `stream stop`."""
    from tidegate.ops.stream import Supervisor
    from tidegate.ops.stream_lock import supervised

    spec = _stream_model(ctx, model)
    if installed_flink() is None:
        raise UsageError(f"supervising {model} needs PyFlink beside tidegate: {INSTALL_HINT}")
    if supervised(ctx, model):
        record = ctx.state.stream(model)
        pid = record.supervisor_pid if record else None
        raise UsageError(f"{model} is supervised already (pid {pid})")
    if detach:
        pid, log = _detach(ctx, model)
        emit(
            as_json,
            _document(ctx, model, pid, log),
            lambda: echo(f"{model}: supervisor {pid} started; its log: {log}"),
        )
        return
    _private_environment(ctx, spec.stream.env)
    stopping = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stopping.set())
    Supervisor(ctx, model, lambda text: echo(text, err=as_json)).run(stopping)
    emit(as_json, _document(ctx, model, os.getpid(), None), lambda: None)


@stream.command()
@click.argument("model", cls=Argument, help="The stream model whose supervisor to stop.")
@common
def stop(ctx: Any, as_json: bool, model: str) -> None:
    """Stop MODEL's supervisor: its job stops with a savepoint it resumes from."""
    from tidegate.ops.stream_lock import supervised

    _stream_model(ctx, model)
    record = ctx.state.stream(model)
    if not supervised(ctx, model) or record is None or record.supervisor_pid is None:
        raise UsageError(f"{model} is not supervised on this machine")
    os.kill(record.supervisor_pid, signal.SIGTERM)
    deadline = time.monotonic() + ANSWER_SECONDS
    while supervised(ctx, model):
        if time.monotonic() > deadline:
            raise OperationFailed(f"{model}: its supervisor did not stop in time")
        time.sleep(POLL_SECONDS)
    emit(
        as_json,
        _document(ctx, model, record.supervisor_pid, None),
        lambda: echo(f"{model}: stopped; {_stopped(ctx, model)}"),
    )


def _stopped(ctx: Any, model: str) -> str:
    record = ctx.state.stream(model)
    if record is None or record.savepoint is None:
        return "no savepoint was taken"
    return f"it resumes from savepoint {record.savepoint}"


def _private_environment(ctx: Any, named: tuple[str, ...]) -> None:
    """The job is given the variables it names, never the project's other secrets."""
    for variable in ctx.project.settings.secret_variables():
        if variable not in named:
            os.environ.pop(variable, None)


def _detach(ctx: Any, model: str) -> tuple[int, Path]:
    """Start `stream start MODEL` in a session of its own; return once it supervises."""
    from tidegate.ops.stream_lock import LOCKS, supervised

    log = ctx.project_dir.resolve() / LOCKS / f"{model}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as output:
        child = subprocess.Popen(
            [sys.executable, "-m", "tidegate", "stream", "start", model, "--project", "."],
            cwd=ctx.project_dir,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + ANSWER_SECONDS
    while not supervised(ctx, model):
        if child.poll() is not None:
            tail = (log.read_text().strip().splitlines() or ["no output"])[-1]
            raise OperationFailed(f"the supervisor of {model} ended: {tail}")
        if time.monotonic() > deadline:
            raise OperationFailed(f"the supervisor of {model} did not start in time; see {log}")
        time.sleep(POLL_SECONDS)
    return child.pid, log
