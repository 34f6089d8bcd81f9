"""Reconciling the ledger from the warehouse's commit markers after a crash (SPEC §5, §7).

Runs when a writer starts, holding the warehouse, and touches only attempts a dead process left
pending: not the whole history.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidegate.domain.attempt import AttemptState, RunStatus
from tidegate.domain.checksum import Checksum
from tidegate.domain.clock import Clock, stamp
from tidegate.engines.base import Engine
from tidegate.state.base import StateStore

INTERRUPTED = "interrupted: the process stopped before publishing; nothing was published"


@dataclass(frozen=True)
class Reconciliation:
    published: tuple[str, ...]
    failed: tuple[str, ...]
    runs_interrupted: tuple[str, ...]

    @property
    def changed_anything(self) -> bool:
        return bool(self.published or self.failed or self.runs_interrupted)


def reconcile(engine: Engine, state: StateStore, clock: Clock) -> Reconciliation:
    live = state.live_attempts()
    markers = engine.markers([a.attempt_id for a in live]) if live else {}
    published: list[str] = []
    failed: list[str] = []
    for attempt in live:
        marker = markers.get(attempt.attempt_id)
        if marker is not None:
            # The publish committed in the warehouse; the ledger only missed the outcome. A
            # merge or append marker carries what the partition held after it, not what the
            # attempt staged: the ledger takes the marker's.
            if marker.checksum != attempt.checksum and attempt.state is AttemptState.AUDITED:
                content = Checksum.parse(marker.checksum)
                state.record_published_content(
                    {attempt.attempt_id: (content.rows, marker.checksum)}
                )
            state.publish(attempt.attempt_id, marker.published_at)
            published.append(attempt.attempt_id)
        else:
            state.move_attempt(
                attempt.attempt_id, AttemptState.FAILED, stamp(clock), error=INTERRUPTED
            )
            failed.append(attempt.attempt_id)
    interrupted = []
    for run in state.live_runs():
        state.finish_run(run.run_id, RunStatus.INTERRUPTED, "the process stopped", stamp(clock))
        interrupted.append(run.run_id)
    return Reconciliation(tuple(published), tuple(failed), tuple(interrupted))
