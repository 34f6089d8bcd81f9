"""The attempt state machine of docs/design.md §4."""

from __future__ import annotations

from enum import Enum

from tidegate.domain.errors import TidegateError


class AttemptState(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    STAGED = "staged"
    AUDITED = "audited"
    PUBLISHED = "published"
    FAILED = "failed"
    SKIPPED = "skipped"

    @property
    def terminal(self) -> bool:
        return self in (AttemptState.PUBLISHED, AttemptState.FAILED, AttemptState.SKIPPED)


_FORWARD = {
    AttemptState.PENDING: {AttemptState.RUNNING, AttemptState.SKIPPED},
    AttemptState.RUNNING: {AttemptState.STAGED},
    AttemptState.STAGED: {AttemptState.AUDITED},
    AttemptState.AUDITED: {AttemptState.PUBLISHED},
}


def can_move(current: AttemptState, target: AttemptState) -> bool:
    """Every live attempt may fail; otherwise only the forward steps are allowed."""
    if current.terminal:
        return False
    if target is AttemptState.FAILED:
        return True
    return target in _FORWARD.get(current, set())


def predecessors(target: AttemptState) -> frozenset[AttemptState]:
    """The states an attempt may be in to move to `target`."""
    return frozenset(state for state in AttemptState if can_move(state, target))


class IllegalTransition(TidegateError):
    """An attempt was asked to move where the state machine does not allow (a bug, not a user
    mistake: the ledger refuses it rather than record an impossible history)."""


class RunStatus(str, Enum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    STOPPED = "stopped"
