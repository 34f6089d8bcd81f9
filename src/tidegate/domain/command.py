"""A command model's job as run for an attempt: what was started, with what environment, and
how it ended. What is recorded never holds a secret value."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MASK = "***"
# a declared variable whose name says it holds a secret is recorded masked
SECRET_WORDS = ("PASSWORD", "SECRET", "TOKEN", "KEY")
# ${NAME}: a value taken from tidegate's own environment (recorded masked: it may be a secret)
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
STDERR_TAIL_BYTES = 4000


@dataclass(frozen=True)
class CommandRecord:
    command: tuple[str, ...]
    # the variables tidegate set for the job (its own TIDEGATE_* and the model's env), masked
    environment: Mapping[str, str]
    started_at: str
    pid: int | None = None
    exit_code: int | None = None
    duration_ms: int | None = None
    stderr_tail: str | None = None
    ended_at: str | None = None


def is_secret(name: str, value: str) -> bool:
    return any(word in name.upper() for word in SECRET_WORDS) or bool(REFERENCE.search(value))


def resolve(declared: Sequence[tuple[str, str]], environ: Mapping[str, str]) -> dict[str, str]:
    """The declared variables with their ${NAME} references replaced from `environ`; raises
    KeyError naming a reference that is not set."""
    return {name: REFERENCE.sub(lambda m: environ[m.group(1)], value) for name, value in declared}


def masked(declared: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The declared variables as recorded: secret ones masked."""
    return {name: MASK if is_secret(name, value) else value for name, value in declared}


def tail(data: bytes) -> str:
    """The end of a job's stderr, as text, whole lines when it was cut."""
    text = data[-STDERR_TAIL_BYTES:].decode(errors="replace")
    if len(data) > STDERR_TAIL_BYTES and "\n" in text:
        text = text.split("\n", 1)[1]
    return text
