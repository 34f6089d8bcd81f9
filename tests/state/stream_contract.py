"""The StateStore conformance suite for stream models: the `streams` ledger table (one row per
model, rewritten as the stream changes) and the history event written with a change. Every
store subclasses it with the `store` fixture of tests/state/contract.py."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import psycopg
import pytest

from tests.state.contract import AT, LATER, V1, V2, version
from tidegate.domain.stream import StreamRecord, StreamState
from tidegate.state.base import Event, StateStore

STARTING = StreamRecord(
    model="daily_revenue",
    version_id=V1.version_id,
    state=StreamState.STARTING,
    job_id=None,
    restored_from=None,
    savepoint=None,
    checkpoint=None,
    checkpoints=0,
    supervisor_pid=4242,
    supervisor_host="host-a",
    heartbeat_at=AT,
    updated_at=AT,
)
RUNNING = replace(
    STARTING,
    version_id=V2.version_id,
    state=StreamState.RUNNING,
    job_id="a" * 32,
    restored_from="/state/daily_revenue/savepoints/savepoint-1",
    savepoint="/state/daily_revenue/savepoints/savepoint-1",
    checkpoint="/state/daily_revenue/" + "a" * 32 + "/chk-7",
    checkpoints=7,
    supervisor_pid=4343,
    supervisor_host="host-b",
    heartbeat_at=LATER,
    updated_at=LATER,
    previous_version_id=V1.version_id,
    address="http://127.0.0.1:8081",
)
# what a store raises when a row breaks the schema's constraints (a foreign key)
BROKEN = (sqlite3.IntegrityError, psycopg.IntegrityError)


def takeover(version_id: str, model: str = "daily_revenue") -> Event:
    return Event(
        kind="takeover",
        actor="supervisor",
        at=LATER,
        model=model,
        version_id=version_id,
        reason="RUNNING, 2 checkpoint(s) completed, no restart",
        detail={"previous": V1.version_id, "restored_from": "/state/savepoint-1"},
    )


class StreamStoreContract:
    @pytest.fixture
    def streaming(self, store: StateStore) -> StateStore:
        store.save_version(V1)
        store.save_version(V2)
        return store

    def test_an_unknown_model_has_no_stream(self, streaming: StateStore) -> None:
        assert streaming.stream("daily_revenue") is None
        assert streaming.streams() == []

    def test_a_saved_stream_is_read_back_whole(self, streaming: StateStore) -> None:
        streaming.save_stream(STARTING)
        assert streaming.stream("daily_revenue") == STARTING
        assert streaming.stream("monthly_revenue") is None

    def test_saving_again_rewrites_the_row(self, streaming: StateStore) -> None:
        streaming.save_stream(STARTING)
        streaming.save_stream(RUNNING)
        assert streaming.stream("daily_revenue") == RUNNING
        assert streaming.streams() == [RUNNING]
        # and back: every column is rewritten, the ones set to None too
        streaming.save_stream(STARTING)
        assert streaming.stream("daily_revenue") == STARTING

    def test_streams_are_listed_by_model(self, streaming: StateStore) -> None:
        others = [version(c * 64, 1, model=m) for c, m in (("c", "zeta"), ("d", "alpha"))]
        for found in others:
            streaming.save_version(found)
        streaming.save_stream(replace(STARTING, model="zeta", version_id=others[0].version_id))
        streaming.save_stream(RUNNING)
        streaming.save_stream(replace(STARTING, model="alpha", version_id=others[1].version_id))
        assert [r.model for r in streaming.streams()] == ["alpha", "daily_revenue", "zeta"]
        assert streaming.streams()[1] == RUNNING

    def test_an_event_is_written_with_the_change(self, streaming: StateStore) -> None:
        streaming.save_stream(STARTING)
        assert streaming.events("daily_revenue") == []
        streaming.save_stream(RUNNING, takeover(V2.version_id))
        assert streaming.events("daily_revenue") == [takeover(V2.version_id)]
        assert streaming.events("monthly_revenue") == []

    def test_a_change_whose_event_cannot_be_written_is_not_kept(
        self, streaming: StateStore
    ) -> None:
        streaming.save_stream(STARTING)
        # the event fails after the row was written, in the same transaction
        broken = replace(takeover(V2.version_id), detail={"not json": object()})
        with pytest.raises(TypeError):
            streaming.save_stream(RUNNING, broken)
        assert streaming.stream("daily_revenue") == STARTING
        assert streaming.events("daily_revenue") == []

    def test_a_stream_must_run_a_saved_version(self, streaming: StateStore) -> None:
        with pytest.raises(BROKEN):
            streaming.save_stream(replace(STARTING, version_id="f" * 12))
        with pytest.raises(BROKEN):
            streaming.save_stream(replace(RUNNING, previous_version_id="f" * 12))
        assert streaming.stream("daily_revenue") is None
