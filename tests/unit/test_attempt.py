"""The attempt state machine of docs/design.md §4."""

from __future__ import annotations

import itertools

import pytest

from tidegate.domain.attempt import AttemptState, IllegalTransition, can_move, predecessors
from tidegate.domain.errors import TidegateError

S = AttemptState
ALLOWED = {
    (S.PENDING, S.RUNNING),
    (S.PENDING, S.SKIPPED),
    (S.RUNNING, S.STAGED),
    (S.STAGED, S.AUDITED),
    (S.AUDITED, S.PUBLISHED),
    # anything live can fail
    (S.PENDING, S.FAILED),
    (S.RUNNING, S.FAILED),
    (S.STAGED, S.FAILED),
    (S.AUDITED, S.FAILED),
}
TERMINAL = {S.PUBLISHED, S.FAILED, S.SKIPPED}


def test_terminal_states() -> None:
    assert {s for s in S if s.terminal} == TERMINAL


@pytest.mark.parametrize(("current", "target"), sorted(ALLOWED))
def test_allowed_transitions(current: AttemptState, target: AttemptState) -> None:
    assert can_move(current, target)
    assert current in predecessors(target)


REFUSED = sorted(set(itertools.product(S, S)) - ALLOWED)


@pytest.mark.parametrize(("current", "target"), REFUSED)
def test_refused_transitions(current: AttemptState, target: AttemptState) -> None:
    assert not can_move(current, target)
    assert current not in predecessors(target)


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
def test_terminal_states_cannot_move_at_all(terminal: AttemptState) -> None:
    assert not any(can_move(terminal, target) for target in S)


def test_the_happy_path_reaches_published() -> None:
    path = (S.PENDING, S.RUNNING, S.STAGED, S.AUDITED, S.PUBLISHED)
    assert all(can_move(a, b) for a, b in itertools.pairwise(path))
    assert path[-1].terminal


def test_an_illegal_transition_is_a_tidegate_error() -> None:
    assert issubclass(IllegalTransition, TidegateError)


def test_no_step_skips_the_audit() -> None:
    assert not can_move(S.STAGED, S.PUBLISHED)
    assert not can_move(S.RUNNING, S.PUBLISHED)
    assert not can_move(S.RUNNING, S.AUDITED)
