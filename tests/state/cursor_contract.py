"""The StateStore conformance suite for cursor models: the marks each run records, where each
version's newest published interval ends, and a cursor version's declaration kept whole. Every
store subclasses it with the `store` fixture of tests/state/contract.py."""

from __future__ import annotations

from dataclasses import replace

from tests.state.contract import AT, LATER, RUN_A, RUN_B, attempt, run, spec, version
from tidegate.domain.attempt import AttemptState
from tidegate.domain.cursor import CursorKind, CursorMark, CursorSpec, WatermarkRule
from tidegate.domain.model import WriteMode
from tidegate.domain.partitions import Grain
from tidegate.state.base import StateStore

CURSOR = CursorSpec("events", "raw_events", "id", CursorKind.INTEGER, start=10, batch_rows=500)
CURSOR_V1 = replace(
    version("c1" + "0" * 62, 1),
    spec=replace(spec(), grain=Grain.CURSOR, write_mode=WriteMode.APPEND, cursor=CURSOR),
)
CURSOR_V2 = replace(version("c2" + "0" * 62, 2), spec=CURSOR_V1.spec)


def mark(run_id: str, candidate: int | None, column: str = "id") -> CursorMark:
    return CursorMark(
        run_id=run_id,
        model="daily_revenue",
        table="raw_events",
        column=column,
        observed_at=AT,
        candidate=candidate,
        snapshot="750:760:752",
        committed=10,
        watermark=None,
        rule=WatermarkRule.SNAPSHOT,
        reason="waiting for transaction(s) 752 still open",
    )


def published_interval(
    store: StateStore, attempt_id: str, start: int, end: int, version_id: str, at: str
) -> None:
    cursor_attempt = replace(
        attempt(attempt_id, version_id=version_id),
        grain="cursor",
        partition_start=start,
        partition_end=end,
    )
    store.create_attempt(cursor_attempt)
    for state in (AttemptState.RUNNING, AttemptState.STAGED):
        store.move_attempt(attempt_id, state, at)
    store.move_attempt(attempt_id, AttemptState.AUDITED, at, rows=1, checksum="1:00000000000000aa")
    store.publish(attempt_id, at)


class CursorStoreContract:
    def test_a_cursor_version_keeps_its_declaration(self, store: StateStore) -> None:
        store.save_version(CURSOR_V1)
        assert store.get_version(CURSOR_V1.version_id) == CURSOR_V1

    def test_marks_are_read_newest_first_per_source_column(self, store: StateStore) -> None:
        store.create_run(run(RUN_A))
        store.create_run(run(RUN_B))
        store.record_cursor_mark(mark(RUN_A, 100))
        store.record_cursor_mark(mark(RUN_B, None))
        store.record_cursor_mark(replace(mark(RUN_B, 7, "created_at"), model="other"))
        found = store.cursor_marks("daily_revenue", "raw_events", "id")
        assert found == [mark(RUN_B, None), mark(RUN_A, 100)]
        assert store.cursor_marks("daily_revenue", "raw_events", "id", limit=1) == [
            mark(RUN_B, None)
        ]
        assert store.cursor_marks("daily_revenue", "raw_events", "created_at") == []
        assert [m.model for m in store.run_cursor_marks(RUN_B)] == ["daily_revenue", "other"]

    def test_each_versions_furthest_end_last_published_first_whatever_the_clock(
        self, store: StateStore
    ) -> None:
        for found in (CURSOR_V1, CURSOR_V2):
            store.save_version(found)
        store.create_run(run(RUN_A))
        assert store.newest_published("daily_revenue") == []
        published_interval(store, "att-1", 5, 30, CURSOR_V2.version_id, LATER)
        published_interval(store, "att-2", 0, 40, CURSOR_V1.version_id, LATER)
        # published last, stamped earlier (--as-of, or a clock set back)
        published_interval(store, "att-3", 40, 65, CURSOR_V1.version_id, AT)
        found = store.newest_published("daily_revenue")
        assert [(version_id, end) for version_id, end, _ in found] == [
            (CURSOR_V1.version_id, 65),
            (CURSOR_V2.version_id, 30),
        ]
        assert found[0][2] > found[1][2]

    def test_a_retried_interval_is_published_with_the_end_it_processed(
        self, store: StateStore
    ) -> None:
        store.save_version(CURSOR_V1)
        store.create_run(run(RUN_A))
        failed = replace(
            attempt("att-1", version_id=CURSOR_V1.version_id),
            grain="cursor",
            partition_start=0,
            partition_end=40,
        )
        store.create_attempt(failed)
        store.move_attempt("att-1", AttemptState.FAILED, AT, error="interrupted")
        published_interval(store, "att-2", 0, 55, CURSOR_V1.version_id, LATER)
        found = store.partition("daily_revenue", 0)
        assert found is not None
        assert (found.partition_end, found.attempt_id) == (55, "att-2")
        assert store.published_intervals("daily_revenue", 0, 100) == [(0, 55)]
