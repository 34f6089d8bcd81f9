"""The supervisor lock of a stream model: a file lock in `.tidegate/streams/MODEL.lock` that
the supervising process holds for its life. The kernel lets go of it when that process dies,
however it dies, so whether a stream is supervised is never guessed from a pid."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tidegate.domain.errors import BusyError
from tidegate.ops.context import Context

LOCKS = Path(".tidegate") / "streams"


def lock_file(ctx: Context, model: str) -> Path:
    return ctx.project_dir / LOCKS / f"{model}.lock"


@contextmanager
def claimed(ctx: Context, model: str) -> Iterator[None]:
    """Hold the model's supervisor lock for as long as the block runs (the kernel lets go of it
    if this process dies); BusyError when another supervisor holds it."""
    path = lock_file(ctx, model)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            record = ctx.state.stream(model)
            pid = record.supervisor_pid if record else None
            raise BusyError(f"a supervisor already runs {model} (pid {pid})") from None
        yield


def supervised(ctx: Context, model: str) -> bool:
    """Whether a live supervisor holds `model` on this machine."""
    path = lock_file(ctx, model)
    if not path.exists():
        return False
    with path.open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False
