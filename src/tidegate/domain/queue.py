"""Distributed backfills (docs/design.md §7): a run's batches queued in the shared ledger and
claimed by `tidegate worker` processes through leases. Pure rules: what a lease is, what a run's
batches add up to, and when a run is over.

A lease expires by the ledger database's clock, never a worker's. Every claim raises the batch's
fencing token; the warehouse refuses a publish carrying an older one, and the ledger refuses to
settle the batch with it, so a worker that slept past its lease can neither publish nor
checkpoint.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass

from tidegate.domain.backfill import Progress

# a lease lives this long unless its worker renews it (by heartbeat, every third of it)
DEFAULT_LEASE_SECONDS = 30.0


class HeldError(Exception):
    """Partitions of a new distributed run are held by another live one."""

    def __init__(self, run_id: str, start: int, end: int) -> None:
        super().__init__(run_id, start, end)
        self.run_id = run_id
        self.start = start
        self.end = end


@dataclass(frozen=True)
class Lease:
    """A worker's claim on one batch of a run until `expires_ms` (the ledger's clock), with the
    batch's fencing token."""

    run_id: str
    batch: int
    model: str
    start: int
    end: int
    token: int
    worker: str
    expires_ms: int


@dataclass(frozen=True)
class BatchTally:
    """What one batch did, as its worker settles it (or batches summed)."""

    published: int = 0
    failed: int = 0
    skipped: int = 0
    rows: int = 0
    source_rows: int = 0
    check_failures: int = 0
    mismatches: int = 0

    def plus(self, other: BatchTally) -> BatchTally:
        return BatchTally(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def minus(self, other: BatchTally) -> BatchTally:
        return BatchTally(*(a - b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def progress(self, elapsed_seconds: float) -> Progress:
        """What was done as the stop-loss judges it (the same rules as on one machine)."""
        return Progress(
            done=self.published + self.failed,
            failed=self.failed,
            check_failures=self.check_failures,
            reconciliation_mismatches=self.mismatches,
            source_rows=self.source_rows,
            elapsed_seconds=elapsed_seconds,
        )


@dataclass(frozen=True)
class RunTally:
    """A distributed run's batches summed: what they did, and where they are."""

    done: BatchTally
    queued: int  # waiting for a worker, or held by a lease that expired
    in_flight: int  # held by a live lease

    def over(self, halted: bool) -> bool:
        """Whether the run is over: every batch done, or no batch may start any more (a stop
        or a stop-loss) and none is in flight."""
        if self.in_flight:
            return False
        return halted or not self.queued
