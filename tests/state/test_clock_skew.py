"""Clock skew between workers: leases live and expire by the ledger database's clock
(`ledger_now_ms()`, the server's clock_timestamp()), never a worker's own. A worker whose
local clock runs an hour or a day ahead cannot steal a live lease; one whose clock runs behind
cannot keep a lease past its expiry."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.state.postgres_kit import fresh_schema, open_store
from tests.state.queue_contract import HOUR_MS, queue
from tidegate.domain.queue import BatchTally
from tidegate.state.postgres import PostgresStateStore

pytestmark = pytest.mark.postgres


@pytest.fixture
def holder() -> Iterator[tuple[str, PostgresStateStore]]:
    with fresh_schema() as schema:
        store = open_store(schema)
        try:
            yield schema, store
        finally:
            store.close()


def skew(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """This process's wall clock, as a worker on a badly set machine sees it."""
    real_time, real_ns = time.time, time.time_ns
    monkeypatch.setattr(time, "time", lambda: real_time() + seconds)
    monkeypatch.setattr(time, "time_ns", lambda: real_ns() + int(seconds * 1e9))


@pytest.mark.parametrize("ahead", [3600, 86_400], ids=["an hour", "a day"])
def test_a_worker_whose_clock_runs_ahead_cannot_steal_a_live_lease(
    holder: tuple[str, PostgresStateStore], monkeypatch: pytest.MonkeyPatch, ahead: int
) -> None:
    schema, store = holder
    queue(store, "run-skew1", batches=1)
    lease = store.claim_batch("honest", 60_000)  # one minute, by the server's clock
    assert lease is not None
    skew(monkeypatch, ahead)
    skewed = open_store(schema)  # another worker's session, from the skewed process
    try:
        assert time.time() > lease.expires_ms / 1000 + ahead - 120  # it believes it expired
        assert skewed.claim_batch("skewed", HOUR_MS) is None
    finally:
        skewed.close()
    assert store.settle_batch(lease, BatchTally(published=1, rows=4))  # the holder finishes


def test_a_worker_whose_clock_runs_behind_cannot_outlive_its_lease(
    holder: tuple[str, PostgresStateStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    schema, store = holder
    queue(store, "run-skew2", batches=1)
    skew(monkeypatch, -3600)
    lease = store.claim_batch("behind", 1)  # a lease of 1 ms by the server's clock
    assert lease is not None
    time.sleep(0.01)  # the server's clock passes it; this worker's is an hour behind
    assert not store.renew_lease(lease, HOUR_MS)
    assert not store.settle_batch(lease, BatchTally(published=1, rows=4))
    other = open_store(schema)
    try:
        taken = other.claim_batch("other", HOUR_MS)
        assert taken is not None and taken.token > lease.token
    finally:
        other.close()
