"""Reconciling the ledger from the warehouse's commit markers after a crash (docs/design.md §9, §7).

Runs when a writer starts, holding the warehouse, and touches only attempts a dead process left
pending: not the whole history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tidegate.domain.attempt import AttemptState, RunStatus
from tidegate.domain.checksum import Checksum
from tidegate.domain.clock import Clock, stamp
from tidegate.domain.run import Attempt
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
    published, failed = settle_left(engine, state, clock, state.live_attempts())
    interrupted = []
    for run in state.live_runs():
        if run.distributed:
            # its batches wait in the ledger for workers, who settle what a dead one left
            continue
        state.finish_run(run.run_id, RunStatus.INTERRUPTED, "the process stopped", stamp(clock))
        interrupted.append(run.run_id)
    return Reconciliation(
        tuple(a.attempt_id for a in published),
        tuple(a.attempt_id for a in failed),
        tuple(interrupted),
    )


def settle_left(
    engine: Engine, state: StateStore, clock: Clock, live: Sequence[Attempt]
) -> tuple[list[Attempt], list[Attempt]]:
    """End attempts a dead process left: published when the warehouse holds their commit
    marker, failed otherwise. Returns (published, failed)."""
    markers = engine.markers([a.attempt_id for a in live]) if live else {}
    published: list[Attempt] = []
    failed: list[Attempt] = []
    for attempt in live:
        marker = markers.get(attempt.attempt_id)
        if marker is not None:
            # The publish committed in the warehouse; the ledger only missed the outcome. A
            # merge or append marker carries what the partition held after it, not what the
            # attempt staged: the ledger takes the marker's.
            content = Checksum.parse(marker.checksum)
            if marker.checksum != attempt.checksum and attempt.state is AttemptState.AUDITED:
                state.record_published_content(
                    {attempt.attempt_id: (content.rows, marker.checksum)}
                )
            state.publish(attempt.attempt_id, marker.published_at)
            published.append(replace(attempt, rows=content.rows, checksum=marker.checksum))
        else:
            state.move_attempt(
                attempt.attempt_id, AttemptState.FAILED, stamp(clock), error=INTERRUPTED
            )
            failed.append(attempt)
    return published, failed
