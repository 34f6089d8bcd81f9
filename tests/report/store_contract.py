"""Conformance tests of the StateStore reads behind the report and the UI (src/tidegate/state/
base.py, "the report and the UI"). Every store subclasses it, providing `store` (open, empty).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from tests.state.contract import AT, LATER, RUN_A, RUN_B, T0, V1, V2, attempt, run
from tidegate.domain.attempt import AttemptState, RunStatus
from tidegate.domain.checks import CheckResult
from tidegate.domain.model import Severity
from tidegate.domain.partitions import DAY_SECONDS
from tidegate.report.rows import CellRow
from tidegate.state.base import Event, StateStore

SUM = "1:0000000000000001"
FAILED_CHECK = CheckResult("unique_d", "unique", Severity.BLOCKING, False, "2", "2 <b>keys</b>")
WARNED = CheckResult("n_not_null", "not_null", Severity.WARN, False, "1", "1 row violates it")
PASSED = CheckResult("contract", "contract", Severity.BLOCKING, True, "0", "ok")


def day(n: int) -> int:
    return T0 + n * DAY_SECONDS


def publish(store: StateStore, attempt_id: str, rows: int = 1) -> None:
    for state in (AttemptState.RUNNING, AttemptState.STAGED):
        store.move_attempt(attempt_id, state, AT)
    store.move_attempt(attempt_id, AttemptState.AUDITED, AT, rows=rows, checksum=f"{rows}:00ff")
    store.publish(attempt_id, LATER)


class ReportStoreContract:
    @pytest.fixture
    def store(self) -> Iterator[StateStore]:
        raise NotImplementedError("a report store suite provides `store`: open and empty")

    @pytest.fixture
    def history(self, store: StateStore) -> StateStore:
        """daily_revenue: day 0 published by v1, days 1-2 by v2 (active), day 3 failed (v2),
        day 4 published by v1 then failed again with v2, day 5 running, day 6 skipped."""
        store.save_version(V1)
        store.save_version(V2)
        store.activate("daily_revenue", V2.version_id, AT, event("deploy", V2.version_id))
        store.create_run(run(RUN_A))
        store.create_run(run(RUN_B))
        for attempt_id, day, version in (
            ("a0", 0, V1),
            ("a1", 1, V2),
            ("a2", 2, V2),
            ("a4", 4, V1),
        ):
            store.create_attempt(attempt(attempt_id, RUN_A, day, version.version_id))
            publish(store, attempt_id, rows=10 + day)
        store.record_checks("a1", [PASSED, WARNED])
        for attempt_id, day in (("f3", 3), ("f4", 4)):
            store.create_attempt(attempt(attempt_id, RUN_B, day, V2.version_id))
            store.record_checks(attempt_id, [PASSED, FAILED_CHECK])
            store.move_attempt(attempt_id, AttemptState.FAILED, LATER, error="blocking check")
        store.create_attempt(attempt("r5", RUN_B, 5, V2.version_id))
        store.move_attempt("r5", AttemptState.RUNNING, LATER)
        store.create_attempt(attempt("s6", RUN_B, 6, V2.version_id))
        store.move_attempt("s6", AttemptState.SKIPPED, LATER, error="orders: no rows")
        return store

    def test_cells_are_in_the_states_status_counts(self, history: StateStore) -> None:
        cells = history.partition_cells("daily_revenue", V2.version_id)
        assert [c.start for c in cells] == [T0 + d * DAY_SECONDS for d in range(7)]
        states = [c.state for c in cells]
        assert states == [
            "stale",
            "published",
            "published",
            "failed",
            "failed",
            "running",
            "skipped",
        ]
        counts, _ = history.segments("daily_revenue", V2.version_id)
        for state in ("published", "stale", "failed", "running"):
            assert states.count(state) == counts[state], state
        assert history.partition_cells("monthly_revenue", None) == []

    def test_a_cell_names_what_is_published_and_the_newest_attempt_when_it_differs(
        self, history: StateStore
    ) -> None:
        cells = {c.start: c for c in history.partition_cells("daily_revenue", V2.version_id)}
        assert cells[day(1)] == CellRow(
            day(1), day(2), "published", V2.version_id, RUN_A, "11:00ff", None, None, None
        )
        # published by v1 in RUN_A, then a failed attempt of v2 in RUN_B
        assert cells[day(4)] == CellRow(
            day(4),
            day(5),
            "failed",
            V1.version_id,
            RUN_A,
            "14:00ff",
            RUN_B,
            V2.version_id,
            "blocking check",
        )
        never = cells[day(3)]
        assert (never.version_id, never.run_id, never.checksum) == (None, None, None)
        assert (never.last_run_id, never.last_version_id) == (RUN_B, V2.version_id)
        assert cells[day(6)].error == "orders: no rows"

    def test_failing_checks_newest_first_and_per_partition(self, history: StateStore) -> None:
        failing = history.failing_checks()
        assert [(f.attempt_id, f.name) for f in failing] == [
            ("f4", "unique_d"),
            ("f3", "unique_d"),
            ("a1", "n_not_null"),
        ]
        assert failing[0].message == "2 <b>keys</b>" and failing[0].severity == "blocking"
        assert [f.attempt_id for f in history.failing_checks(limit=1)] == ["f4"]
        current = history.current_check_failures("daily_revenue")
        assert [(f.start, f.name) for f in current] == [
            (T0 + DAY_SECONDS, "n_not_null"),
            (T0 + 3 * DAY_SECONDS, "unique_d"),
            (T0 + 4 * DAY_SECONDS, "unique_d"),
        ]

    def test_a_check_failure_a_later_publish_passed_is_resolved(self, history: StateStore) -> None:
        later_run = "run-20250104T000000000000Z-cccccc"
        history.create_run(run(later_run))
        history.create_attempt(attempt("p3", later_run, 3, V2.version_id))
        history.record_checks("p3", [PASSED, replace(FAILED_CHECK, passed=True, message="ok")])
        publish(history, "p3")
        failing = {f.attempt_id: f for f in history.failing_checks()}
        assert (failing["f3"].resolved_by, failing["f3"].resolved_at) == (later_run, LATER)
        # day 4 was published before it failed: nothing later fixed it
        assert (failing["f4"].resolved_by, failing["f4"].resolved_at) == (None, None)
        # a publish whose own check did not run resolves nothing
        assert failing["a1"].resolved_by is None

    def test_run_summaries_count_attempts_by_state(self, history: StateStore) -> None:
        history.finish_run(RUN_A, RunStatus.SUCCEEDED, None, LATER)
        summaries = history.run_summaries()
        assert [s.run.run_id for s in summaries] == [RUN_B, RUN_A]  # newest first
        b, a = summaries
        assert a.states == {"published": 4} and a.rows == 10 + 11 + 12 + 14
        assert a.run.status is RunStatus.SUCCEEDED
        assert b.states == {"failed": 2, "running": 1, "skipped": 1} and b.rows == 0
        assert a.first_attempt_at == AT and a.last_attempt_at == LATER
        assert [s.run.run_id for s in history.run_summaries(limit=1)] == [RUN_B]

    def test_a_run_without_attempts_is_summarised_too(self, store: StateStore) -> None:
        store.create_run(run(RUN_A))
        [summary] = store.run_summaries()
        assert (summary.states, summary.rows, summary.first_attempt_at) == ({}, 0, None)

    def test_recent_events_and_outbox_are_newest_first(self, history: StateStore) -> None:
        history.record_event(event("pause", None, reason="<script>x</script>"))
        events = history.recent_events()
        assert [e.kind for e in events] == ["pause", "deploy"]
        assert events[0].reason == "<script>x</script>"
        assert [e.kind for e in history.recent_events(limit=1)] == ["pause"]
        history.add_outbox([("hook", '{"n":1}'), ("file", '{"n":2}')], AT)
        assert [r.payload for r in history.recent_outbox()] == ['{"n":2}', '{"n":1}']
        assert len(history.recent_outbox(limit=1)) == 1

    def test_the_ledger_stamp_changes_with_the_ledger_only(self, history: StateStore) -> None:
        before = history.ledger_stamp()
        history.partition_cells("daily_revenue", V2.version_id)
        history.run_summaries()
        assert history.ledger_stamp() == before
        history.record_event(event("pause", None))
        assert history.ledger_stamp() != before

    def test_reads_inside_reading_work_as_outside(self, history: StateStore) -> None:
        outside = history.partition_cells("daily_revenue", V2.version_id)
        with history.reading():
            inside = history.partition_cells("daily_revenue", V2.version_id)
            summaries = history.run_summaries()
        assert inside == outside and len(summaries) == 2
        history.record_event(event("pause", None))  # the store writes again afterwards


def event(kind: str, version_id: str | None, reason: str | None = None) -> Event:
    return Event(
        kind=kind,
        actor="alice",
        at=AT,
        model="daily_revenue",
        version_id=version_id,
        reason=reason,
    )


def assert_one_snapshot(reader: StateStore, writer: StateStore) -> None:
    """Inside `reading()`, `reader` sees one committed ledger while `writer` (another
    connection) commits; after it, the change and a new ledger stamp."""
    writer.record_event(event("build", None))
    stamp = reader.ledger_stamp()
    with reader.reading():
        assert len(reader.recent_events()) == 1
        writer.record_event(event("pause", None))  # committed by another connection
        assert len(reader.recent_events()) == 1
    assert len(reader.recent_events()) == 2
    assert reader.ledger_stamp() != stamp
