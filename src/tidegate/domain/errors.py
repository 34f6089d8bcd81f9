"""Typed errors; each carries the exit code of docs/design.md §6 that the CLI maps it to."""

from __future__ import annotations


class TidegateError(Exception):
    """Base of every error a user may see as one line of text."""

    exit_code = 1


class OperationFailed(TidegateError):
    """The operation ran and failed (a check, a stop-loss, a failed partition)."""

    exit_code = 1


class UsageError(TidegateError):
    """Bad usage or configuration; nothing was done."""

    exit_code = 2


class ConfigError(UsageError):
    """A project file is invalid. The message names the file, line and field."""

    def __init__(self, path: str, message: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


class StateStoreError(UsageError):
    """The state store cannot be used as it is (corrupt, or from a newer tidegate)."""


class RefusedError(TidegateError):
    """Refused for safety: approval needed, gate not passed, paused, breaking change."""

    exit_code = 3


class BusyError(TidegateError):
    """Another process holds the warehouse or the partitions; nothing was done."""

    exit_code = 4


class StoppedError(TidegateError):
    """Stopped on request before finishing; the operation is resumable."""

    exit_code = 5


class EngineError(OperationFailed):
    """The warehouse engine reported an error while running a model or a check."""


class ContentionError(EngineError):
    """The warehouse was too busy for a statement: it waited for a lock longer than the lock
    timeout, ran longer than the statement timeout, or lost a deadlock. Nothing of its
    transaction was written; trying again later may succeed."""


class FencedError(EngineError):
    """A publish carried a lease's fencing token older than the batch's fence: another worker
    holds the batch now, and nothing was published."""


class ModelError(OperationFailed):
    """A model's own code failed (a Python model's function, a command model's job), or what it
    returned does not fit the model's contract; its attempt fails and nothing is published."""
