"""The StateStore conformance suite for taints, lineage read backwards and consumers' reads.
Every store subclasses it with the `store` fixture of tests/state/contract.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from tests.state.contract import AT, LATER, RUN_A, RUN_B, T0, V1, attempt, run, spec, version
from tidegate.domain.attempt import AttemptState
from tidegate.domain.model import WriteMode
from tidegate.domain.partitions import DAY_SECONDS
from tidegate.domain.run import Input
from tidegate.domain.taint import Mark, MarkKind, Read, Taint
from tidegate.notify.row import ConsumerRead
from tidegate.state.base import Event, StateStore, Told

DAY = DAY_SECONDS
MONTH_END = T0 + 31 * DAY
EARLY = "2025-01-01T12:00:00.000000+00:00"
LATEST = "2025-01-03T00:00:00.000000+00:00"
MERGE = replace(version("c3" + "0" * 62, 3), spec=replace(spec(), write_mode=WriteMode.MERGE))
ORDER = ["monthly_revenue"]
PARENTS = {"monthly_revenue": ["daily_revenue"]}


def taint(taint_id: str, start: int, end: int) -> Taint:
    return Taint(taint_id, "daily_revenue", "day", start, end, "dup load", "alice", AT)


def publish(
    store: StateStore,
    attempt_id: str,
    day: int = 0,
    run_id: str = RUN_A,
    checksum: str = "1:00000000000000aa",
) -> None:
    store.create_attempt(attempt(attempt_id, run_id, day))
    _publish(store, attempt_id, checksum)


def publish_month(
    store: StateStore, attempt_id: str, read: tuple[str, ...], started: str = LATEST
) -> None:
    """A monthly_revenue partition that read January of daily_revenue."""
    monthly = replace(
        attempt(attempt_id),
        model="monthly_revenue",
        grain="month",
        partition_end=MONTH_END,
        started_at=started,
    )
    store.create_attempt(monthly)
    store.record_inputs(attempt_id, [Input("daily_revenue", "model", T0, MONTH_END, None, read)])
    _publish(store, attempt_id)


def _publish(store: StateStore, attempt_id: str, checksum: str = "1:00000000000000aa") -> None:
    for state in (AttemptState.RUNNING, AttemptState.STAGED):
        store.move_attempt(attempt_id, state, AT)
    store.move_attempt(attempt_id, AttemptState.AUDITED, AT, rows=1, checksum=checksum)
    store.publish(attempt_id, AT)


class TaintStoreContract:
    """Not collected itself: subclass it next to StateStoreContract."""

    @pytest.fixture
    def lineage(self, store: StateStore) -> StateStore:
        """Days 0..2 of daily_revenue published, and January of monthly_revenue read them."""
        store.save_version(V1)
        store.create_run(run(RUN_A))
        for day in range(3):
            publish(store, f"att-d{day}", day)
        publish_month(store, "att-m0", ("att-d0", "att-d1", "att-d2"))
        return store

    def test_a_republish_with_other_content_leaves_its_readers_stale(
        self, lineage: StateStore
    ) -> None:
        store = lineage
        publish(store, "att-d1-same", 1)  # the same content: nothing downstream changes
        assert store.tainted_counts() == {}
        publish(store, "att-d1-late", 1, checksum="1:00000000000000bb")
        [stale] = store.marks_of_run(RUN_A, MarkKind.STALE)
        assert (stale.mark.model, stale.mark.attempt_id, stale.mark.depth) == (
            "monthly_revenue",
            "att-m0",
            1,
        )
        assert (stale.mark.via_model, stale.mark.via_start) == ("daily_revenue", T0 + DAY)
        assert "att-d1-same -> att-d1-late" in stale.reason
        assert store.tainted_counts() == {"monthly_revenue": {MarkKind.STALE: 1}}
        assert [e.kind for e in store.events("monthly_revenue")] == ["stale"]
        # recomputing the month clears it
        publish_month(store, "att-m1", ("att-d0", "att-d1-late", "att-d2"), started=LATEST)
        assert store.tainted_counts() == {}

    def test_a_taint_marks_its_range_and_every_partition_that_read_it(
        self, lineage: StateStore
    ) -> None:
        store = lineage
        marks = store.taint(taint("taint-1", T0 + DAY, T0 + 2 * DAY), ORDER, PARENTS)
        assert [(m.model, m.start, m.attempt_id, m.depth) for m in marks] == [
            ("daily_revenue", T0 + DAY, "att-d1", 0),
            ("monthly_revenue", T0, "att-m0", 1),
        ]
        assert (marks[1].via_model, marks[1].via_start) == ("daily_revenue", T0 + DAY)
        found = store.open_taints("monthly_revenue")
        assert [(t.taint_id, t.reason, t.origin, t.mark) for t in found] == [
            ("taint-1", "dup load", "daily_revenue", marks[1])
        ]
        assert [t.mark.start for t in store.open_taints("daily_revenue", T0, T0 + DAY)] == []
        assert store.tainted_counts() == {
            "daily_revenue": {MarkKind.TAINT: 1},
            "monthly_revenue": {MarkKind.TAINT: 1},
        }
        assert len(store.open_taints()) == 2

    def test_what_a_taint_tells_is_written_with_it_or_not_at_all(self, lineage: StateStore) -> None:
        store = lineage

        def tell(marks: Sequence[Mark]) -> Told:
            event = Event(kind="taint", actor="alice", at=AT, model="daily_revenue")
            reached = Event(
                kind="tainted_downstream", actor="alice", at=AT, model="monthly_revenue"
            )
            return Told(event, [("hook", f'{{"marks": {len(marks)}}}')], [reached])

        store.taint(taint("taint-1", T0 + DAY, T0 + 2 * DAY), ORDER, PARENTS, tell)
        assert [(r.target, r.payload) for r in store.outbox()] == [("hook", '{"marks": 2}')]
        assert [e.kind for e in store.events("daily_revenue")] == ["taint"]
        assert [e.kind for e in store.events("monthly_revenue")] == ["tainted_downstream"]

        def killed(marks: Sequence[Mark]) -> Told:
            raise RuntimeError("killed before the notices were queued")

        with pytest.raises(RuntimeError):
            store.taint(taint("taint-2", T0, T0 + DAY), ORDER, PARENTS, killed)
        assert {t.taint_id for t in store.open_taints()} == {"taint-1"}
        assert len(store.outbox()) == 1

    def test_a_range_with_nothing_published_records_nothing(self, lineage: StateStore) -> None:
        assert lineage.taint(taint("taint-1", T0 + 9 * DAY, T0 + 10 * DAY), ORDER, PARENTS) == []
        assert lineage.open_taints() == [] and lineage.tainted_counts() == {}

    def test_readers_are_found_by_the_window_they_read(self, lineage: StateStore) -> None:
        assert lineage.readers("monthly_revenue", "daily_revenue", [(T0 + DAY, T0 + 2 * DAY)]) == [
            Read("monthly_revenue", T0, MONTH_END, "att-m0", T0, MONTH_END)
        ]
        assert (
            lineage.readers("monthly_revenue", "daily_revenue", [(MONTH_END, MONTH_END + 1)]) == []
        )
        assert lineage.readers("monthly_revenue", "orders", [(T0, MONTH_END)]) == []

    def test_publishing_again_clears_a_mark_and_reading_tainted_input_inherits_one(
        self, lineage: StateStore
    ) -> None:
        store = lineage
        store.taint(taint("taint-1", T0 + DAY, T0 + 2 * DAY), ORDER, PARENTS)
        store.create_run(run(RUN_B))
        # the month recomputed while day 1 is still tainted: the new attempt carries the mark
        publish_month(store, "att-m1", ("att-d0", "att-d1", "att-d2"))
        [month] = store.open_taints("monthly_revenue")
        assert (month.mark.attempt_id, month.mark.depth) == ("att-m1", 1)
        assert store.cleared_by_run(RUN_A) == []
        # day 1 published again by RUN_B: its mark is cleared, and it is to be re-read
        store.create_attempt(replace(attempt("att-d1b", RUN_B, 1), started_at=LATEST))
        _publish(store, "att-d1b")
        assert store.open_taints("daily_revenue") == []
        assert store.cleared_by_run(RUN_B) == [("daily_revenue", T0 + DAY, T0 + 2 * DAY)]
        # the month read the old day 1; published from clean input, its mark is cleared too
        publish_month(store, "att-m2", ("att-d0", "att-d1b", "att-d2"))
        assert store.tainted_counts() == {}
        assert ("monthly_revenue", T0, MONTH_END) in store.cleared_by_run(RUN_A)

    def test_a_publish_that_began_before_the_taint_or_keeps_rows_does_not_clear_it(
        self, lineage: StateStore
    ) -> None:
        store = lineage
        # ids carry the real instant they were made: the order of a declaration and an
        # attempt's start, whatever clock (--as-of) each command ran on
        declared = "taint-20260101T120000000000Z-0000aa"
        store.taint(taint(declared, T0 + DAY, T0 + 2 * DAY), ORDER, PARENTS)
        # begun before the taint was declared: it may have read what the taint is about
        early = "att-20260101T115959000000Z-0000bb"
        store.create_attempt(replace(attempt(early, RUN_A, 1), started_at=LATEST))
        _publish(store, early)
        assert [t.mark.attempt_id for t in store.open_taints("daily_revenue")] == ["att-d1"]
        # a merge keeps the rows the mark is about
        store.save_version(MERGE)
        merged = replace(attempt("att-d1-merge", RUN_A, 1, MERGE.version_id), started_at=LATEST)
        store.create_attempt(merged)
        _publish(store, "att-d1-merge")
        assert store.tainted_counts() == {
            "daily_revenue": {MarkKind.TAINT: 1},
            "monthly_revenue": {MarkKind.TAINT: 1},
        }
        assert store.cleared_by_run(RUN_A) == []

    def test_a_consumer_has_read_what_it_acknowledged_or_was_told_once_delivered(
        self, lineage: StateStore
    ) -> None:
        store = lineage
        assert store.consumed("daily_revenue", T0, T0 + 3 * DAY) == {}
        store.record_reads("audit", "daily_revenue", [(T0, T0 + 2 * DAY)], LATER)
        # a read acknowledged before the partition was published is of older data
        store.record_reads("stale", "daily_revenue", [(T0, T0 + 3 * DAY)], EARLY)
        told = ConsumerRead("finance", "daily_revenue", T0 + DAY, T0 + 3 * DAY)
        [row_id] = store.add_outbox([("hook", "{}")], LATER, {0: [told]})
        assert store.consumed("daily_revenue", T0, T0 + 3 * DAY) == {
            T0: ["audit"],
            T0 + DAY: ["audit"],
        }
        store.mark_outbox_delivered(row_id, LATEST)
        assert store.consumed("daily_revenue", T0, T0 + 3 * DAY) == {
            T0: ["audit"],
            T0 + DAY: ["audit", "finance"],
            T0 + 2 * DAY: ["finance"],
        }

    def test_checkpoints_of_one_model_of_a_run(self, lineage: StateStore) -> None:
        assert lineage.run_checkpoints(RUN_A, "daily_revenue") == [(T0, T0 + 3 * DAY)]
        assert lineage.run_checkpoints(RUN_A, "monthly_revenue") == [(T0, MONTH_END)]
