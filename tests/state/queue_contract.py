"""The queue of distributed runs (state/ledger_queue.py), for every store: claims within the run's
throttle, leases that expire by the ledger's clock, fencing tokens that only grow, settling that
a stale token cannot do, and a run closed exactly once.

Leases of 0 ms expire as they are granted: a test shows expiry without waiting for a clock."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from tests.state.contract import V1, run
from tidegate.domain.attempt import RunStatus
from tidegate.domain.partitions import DAY_SECONDS
from tidegate.domain.queue import BatchTally, HeldError
from tidegate.state.base import StateStore

T0 = 1_735_689_600  # 2025-01-01
HOUR_MS = 3_600_000


def days(first: int, count: int) -> tuple[int, int]:
    return T0 + first * DAY_SECONDS, T0 + (first + count) * DAY_SECONDS


def queue(
    store: StateStore,
    run_id: str,
    batches: int = 3,
    max_concurrency: int = 2,
    rate: int | None = None,
    first_day: int = 0,
) -> None:
    """A distributed run of daily_revenue with one-day batches from `first_day`."""
    store.save_version(V1)
    distributed = replace(run(run_id), kind="backfill", distributed=True)
    store.create_distributed_run(
        distributed,
        max_concurrency,
        rate,
        [days(first_day, batches)],
        [(i, *days(first_day + i, 1)) for i in range(batches)],
    )


class QueueStoreContract:
    def test_a_queued_run_is_claimed_batch_by_batch_in_order(self, store: StateStore) -> None:
        queue(store, "run-q1", batches=2, max_concurrency=5)
        first = store.claim_batch("w1", HOUR_MS)
        second = store.claim_batch("w2", HOUR_MS)
        assert first is not None and second is not None
        assert (first.batch, first.start, first.token, first.worker) == (0, T0, 1, "w1")
        assert (second.batch, second.start, second.worker) == (1, T0 + DAY_SECONDS, "w2")
        assert store.claim_batch("w3", HOUR_MS) is None  # nothing left to claim
        fetched = store.get_run("run-q1")
        assert fetched is not None and fetched.distributed
        claims = store.batch_claims("run-q1")
        assert [(b, t, w) for b, t, w, _ in claims] == [(0, 1, "w1"), (1, 2, "w2")]

    def test_claims_stay_within_the_runs_concurrency(self, store: StateStore) -> None:
        queue(store, "run-q2", batches=3, max_concurrency=2)
        held = [store.claim_batch(f"w{i}", HOUR_MS) for i in range(3)]
        assert [h is not None for h in held] == [True, True, False]
        lease = held[0]
        assert lease is not None
        assert store.settle_batch(lease, BatchTally(published=1, rows=4))
        again = store.claim_batch("w9", HOUR_MS)  # a slot is free once a batch is done
        assert again is not None and again.batch == 2

    def test_claims_stay_within_the_runs_rate_per_minute(self, store: StateStore) -> None:
        queue(store, "run-q3", batches=3, max_concurrency=3, rate=2)
        claimed = [store.claim_batch("w", HOUR_MS) for _ in range(3)]
        assert [c is not None for c in claimed] == [True, True, False]

    def test_an_expired_lease_is_reclaimed_with_a_higher_token(self, store: StateStore) -> None:
        queue(store, "run-q4", batches=1)
        dead = store.claim_batch("w1", 0)  # expires as it is granted
        assert dead is not None and dead.token == 1
        taken = store.claim_batch("w2", HOUR_MS)
        assert taken is not None
        assert (taken.batch, taken.token, taken.worker) == (dead.batch, 2, "w2")
        # the old holder can neither renew, nor settle, nor give the batch back
        assert not store.renew_lease(dead, HOUR_MS)
        assert not store.settle_batch(dead, BatchTally(published=1), '{"name": "x"}')
        assert not store.release_batch(dead)
        assert store.run_halt("run-q4") is None  # a stale settle records no halt either
        assert store.settle_batch(taken, BatchTally(published=1, rows=3))
        tally = store.run_tally("run-q4")
        assert (tally.done.published, tally.done.rows, tally.queued, tally.in_flight) == (
            1,
            3,
            0,
            0,
        )

    def test_a_live_lease_is_renewed_and_never_claimed_twice(self, store: StateStore) -> None:
        queue(store, "run-q5", batches=1)
        lease = store.claim_batch("w1", HOUR_MS)
        assert lease is not None
        assert store.renew_lease(lease, HOUR_MS)
        assert store.claim_batch("w2", HOUR_MS) is None
        assert store.run_tally("run-q5").in_flight == 1

    def test_a_released_batch_is_claimed_again(self, store: StateStore) -> None:
        queue(store, "run-q6", batches=1)
        lease = store.claim_batch("w1", HOUR_MS)
        assert lease is not None and store.release_batch(lease)
        again = store.claim_batch("w2", HOUR_MS)
        assert again is not None and again.token == lease.token + 1

    def test_a_stopped_or_halted_run_starts_no_batch(self, store: StateStore) -> None:
        queue(store, "run-q7", batches=2)
        store.request_stop("run-q7", "2025-01-02T00:00:00+00:00")
        assert store.claim_batch("w1", HOUR_MS) is None
        queue(store, "run-q8", batches=3, first_day=10)
        first, second = store.claim_batch("w1", HOUR_MS), store.claim_batch("w2", HOUR_MS)
        assert first is not None and second is not None
        assert store.settle_batch(first, BatchTally(failed=1), '{"name": "max_failures"}')
        assert store.settle_batch(second, BatchTally(failed=1), '{"name": "later"}')
        assert store.claim_batch("w1", HOUR_MS) is None  # a halted run starts no batch
        assert store.run_halt("run-q8") == '{"name": "max_failures"}'  # the first one stays

    def test_a_run_closes_once_and_only_with_no_batch_in_flight(self, store: StateStore) -> None:
        queue(store, "run-q9", batches=1)
        lease = store.claim_batch("w1", HOUR_MS)
        assert lease is not None
        at = "2025-01-02T00:00:00+00:00"
        assert not store.close_distributed_run("run-q9", "succeeded", None, at, None)
        assert store.settle_batch(lease, BatchTally(published=1))
        assert store.run_tally("run-q9").over(halted=False)
        assert store.close_distributed_run("run-q9", "succeeded", None, at, None)
        assert not store.close_distributed_run("run-q9", "failed", "late", at, None)
        closed = store.get_run("run-q9")
        assert closed is not None and closed.status is RunStatus.SUCCEEDED

    def test_partitions_held_by_a_live_run_cannot_be_queued_again(self, store: StateStore) -> None:
        queue(store, "run-qa", batches=3)
        with pytest.raises(HeldError) as held:
            queue(store, "run-qb", batches=2, first_day=2)
        assert (held.value.run_id, held.value.start) == ("run-qa", days(2, 1)[0])
        assert store.get_run("run-qb") is None  # nothing of the refused run was written
        queue(store, "run-qc", batches=2, first_day=3)  # after the held range: free

    def test_a_reopened_run_queues_what_is_not_done(self, store: StateStore) -> None:
        queue(store, "run-qd", batches=2)
        done = store.claim_batch("w1", HOUR_MS)
        dead = store.claim_batch("w2", HOUR_MS)
        assert done is not None and dead is not None
        assert store.settle_batch(done, BatchTally(published=1))
        store.request_stop("run-qd", "2025-01-02T00:00:00+00:00")
        store.finish_run("run-qd", RunStatus.STOPPED, "stopped", "2025-01-02T01:00:00+00:00")
        store.reopen_distributed_run("run-qd", 99, [days(0, 2)], "2025-01-03T00:00:00+00:00")
        again = store.claim_batch("w3", HOUR_MS)
        assert again is not None
        assert (again.batch, again.token) == (dead.batch, dead.token + 1)
        assert not store.settle_batch(dead, BatchTally())
        assert store.claim_batch("w4", HOUR_MS) is None  # the done batch stays done

    def test_concurrent_claims_never_share_a_batch(self, store: StateStore) -> None:
        queue(store, "run-qe", batches=12, max_concurrency=12)
        ready = threading.Barrier(6)

        def claim_all(worker: str) -> list[int]:
            ready.wait()
            taken = []
            while (lease := store.claim_batch(worker, HOUR_MS)) is not None:
                taken.append(lease.batch)
            return taken

        with ThreadPoolExecutor(6) as pool:
            claimed = [
                b for found in pool.map(claim_all, [f"w{i}" for i in range(6)]) for b in found
            ]
        assert sorted(claimed) == list(range(12))
        assert store.run_tally("run-qe").in_flight == 12

    def test_an_expired_lease_no_one_took_can_neither_renew_nor_settle(
        self, store: StateStore
    ) -> None:
        queue(store, "run-qf", batches=1)
        late = store.claim_batch("w1", 0)
        assert late is not None
        assert not store.renew_lease(late, HOUR_MS)
        assert not store.settle_batch(late, BatchTally(published=1))
        assert store.run_tally("run-qf").queued == 1  # still there for the next claim

    def test_tokens_grow_across_runs(self, store: StateStore) -> None:
        queue(store, "run-qg", batches=1)
        queue(store, "run-qh", batches=1, first_day=5)
        tokens = [store.claim_batch(f"w{i}", HOUR_MS) for i in range(2)]
        assert [t.token for t in tokens if t is not None] == [1, 2]

    def test_reopening_queues_again_the_batches_that_left_partitions_undone(
        self, store: StateStore
    ) -> None:
        queue(store, "run-qi", batches=3, max_concurrency=3)
        leases = [store.claim_batch(f"w{i}", HOUR_MS) for i in range(3)]
        assert all(lease is not None for lease in leases)
        ok, failed, _ = leases
        assert ok is not None and failed is not None
        assert store.settle_batch(ok, BatchTally(published=1, rows=5, source_rows=9))
        assert store.settle_batch(failed, BatchTally(failed=1, source_rows=9))
        store.request_stop("run-qi", "2025-01-02T00:00:00+00:00")
        store.finish_run("run-qi", RunStatus.FAILED, "1 failed", "2025-01-02T01:00:00+00:00")
        store.reopen_distributed_run("run-qi", 99, [days(0, 3)], "2025-01-03T00:00:00+00:00")
        resumed = store.run_resumed("run-qi")
        assert resumed == (
            "2025-01-03T00:00:00+00:00",
            BatchTally(published=1, rows=5, source_rows=9),
        )
        again = sorted(
            lease.batch
            for lease in (store.claim_batch(f"v{i}", HOUR_MS) for i in range(3))
            if lease is not None
        )
        assert again == [1, 2]  # the failed batch and the one left in flight; not the done one
