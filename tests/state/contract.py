"""The StateStore conformance suite (src/tidegate/state/base.py). Every store subclasses it.

A subclass provides one fixture, `store`: an open, empty state store, closed after the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from tidegate.domain.attempt import AttemptState, IllegalTransition, RunStatus
from tidegate.domain.checks import CheckResult
from tidegate.domain.gate import Gate
from tidegate.domain.model import ChangeKind, CheckSpec, Column, ModelSpec, Severity, Version
from tidegate.domain.partitions import DAY_SECONDS, Grain
from tidegate.domain.reconciliation import ReconciliationResult
from tidegate.domain.run import Attempt, Input, Run
from tidegate.state.base import Event, StateStore

T0 = 1_735_689_600  # 2025-01-01T00:00:00Z
AT = "2025-01-02T00:00:00.000000+00:00"
LATER = "2025-01-02T01:00:00.000000+00:00"


def spec(model: str = "daily_revenue", sql: str = "SELECT 1 AS d") -> ModelSpec:
    return ModelSpec(
        name=model,
        path=f"models/{model}.sql",
        sql=sql,
        grain=Grain.DAY,
        partition_column="d",
        columns=(Column("d", "DATE", False), Column("n", "BIGINT", True)),
        start="2025-01-01",
        unique_key=("d",),
        schedule="0 2 * * *",
        checks=(CheckSpec("n_not_null", "not_null", Severity.WARN, {"columns": ["n"]}),),
        upstream=("orders_clean",),
        sources=("orders",),
    )


def version(
    fingerprint: str,
    seq: int = 1,
    model: str = "daily_revenue",
    change: ChangeKind = ChangeKind.NEW,
) -> Version:
    return Version(
        version_id=fingerprint[:12],
        model=model,
        seq=seq,
        fingerprint=fingerprint,
        sql=f"SELECT {seq} AS d",
        spec=spec(model),
        upstream_fingerprints={"orders_clean": "e" * 64},
        git_commit="abc123",
        git_dirty=True,
        tool_versions={"tidegate": "0.1.0", "duckdb": "1.2"},
        created_at=AT,
        change=change,
    )


V1 = version("a1" + "0" * 62, 1)
V2 = version("b2" + "0" * 62, 2, change=ChangeKind.MODIFIED)


def run(run_id: str, status: RunStatus = RunStatus.RUNNING, models: tuple[str, ...] = ()) -> Run:
    return Run(
        run_id=run_id,
        kind="run",
        models=models or ("daily_revenue",),
        partitions="2025-01-01..2025-01-03",
        requester="alice",
        status=status,
        started_at=AT,
        params={"batch_size": 2, "stale_only": False},
        pid=4242,
    )


RUN_A = "run-20250102T000000000000Z-aaaaaa"
RUN_B = "run-20250103T000000000000Z-bbbbbb"


def attempt(
    attempt_id: str, run_id: str = RUN_A, day: int = 0, version_id: str = V1.version_id
) -> Attempt:
    start = T0 + day * DAY_SECONDS
    return Attempt(
        attempt_id=attempt_id,
        run_id=run_id,
        model="daily_revenue",
        grain="day",
        partition_start=start,
        partition_end=start + DAY_SECONDS,
        version_id=version_id,
        state=AttemptState.PENDING,
        started_at=AT,
    )


def deploy_event(version_id: str, at: str = AT) -> Event:
    return Event(
        kind="deploy",
        actor="alice",
        at=at,
        model="daily_revenue",
        version_id=version_id,
        reason="release",
        detail={"forced": False},
    )


FORWARD = [AttemptState.RUNNING, AttemptState.STAGED, AttemptState.AUDITED]


class StateStoreContract:
    """Conformance tests of the StateStore seam. Not collected itself: subclass it."""

    @pytest.fixture
    def store(self) -> Iterator[StateStore]:
        raise NotImplementedError("a state suite provides `store`: open and empty")

    @pytest.fixture
    def with_versions(self, store: StateStore) -> StateStore:
        store.save_version(V1)
        store.save_version(V2)
        return store

    def test_the_store_refuses_a_move_the_state_machine_forbids(
        self, with_versions: StateStore
    ) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        store.create_attempt(attempt("att-1"))
        with pytest.raises(IllegalTransition):
            store.move_attempt("att-1", AttemptState.AUDITED, AT)
        with pytest.raises(IllegalTransition):
            store.publish("att-1", AT)
        store.move_attempt("att-1", AttemptState.FAILED, AT, error="gave up")
        with pytest.raises(IllegalTransition):
            store.move_attempt("att-1", AttemptState.RUNNING, AT)
        found = store.get_attempt("att-1")
        assert found is not None and found.state is AttemptState.FAILED

    def publish_through(
        self, store: StateStore, attempt_id: str, rows: int, checksum: str, at: str = AT
    ) -> None:
        for state in (AttemptState.RUNNING, AttemptState.STAGED):
            store.move_attempt(attempt_id, state, at)
        store.move_attempt(attempt_id, AttemptState.AUDITED, at, rows=rows, checksum=checksum)
        store.publish(attempt_id, at)

    # versions ----------------------------------------------------------------------------------

    def test_a_saved_version_reads_back_whole(self, store: StateStore) -> None:
        assert store.save_version(V1) == V1
        assert store.get_version(V1.version_id) == V1
        assert store.find_version("daily_revenue", V1.fingerprint) == V1
        assert store.versions("daily_revenue") == [V1]
        assert store.get_version("nope") is None
        assert store.find_version("daily_revenue", "f" * 64) is None
        assert store.find_version("other_model", V1.fingerprint) is None

    def test_save_version_is_idempotent_on_model_and_fingerprint(self, store: StateStore) -> None:
        store.save_version(V1)
        again = replace(V1, version_id="zzzzzzzzzzzz", seq=7, created_at=LATER)
        assert store.save_version(again) == V1
        assert store.versions("daily_revenue") == [V1]
        assert store.next_seq("daily_revenue") == 2

    def test_the_same_fingerprint_in_another_model_is_another_version(
        self, store: StateStore
    ) -> None:
        store.save_version(V1)
        other = replace(
            V1, version_id="c3" + "0" * 10, model="monthly_revenue", spec=spec("monthly_revenue")
        )
        assert store.save_version(other) == other
        assert store.versions("monthly_revenue") == [other]

    def test_versions_are_ordered_and_numbered(self, with_versions: StateStore) -> None:
        assert [v.seq for v in with_versions.versions("daily_revenue")] == [1, 2]
        assert with_versions.next_seq("daily_revenue") == 3
        assert with_versions.next_seq("unknown_model") == 1

    def test_resolve_version(self, with_versions: StateStore) -> None:
        store = with_versions
        assert store.resolve_version("daily_revenue", "v1") == V1
        assert store.resolve_version("daily_revenue", "V2") == V2
        assert store.resolve_version("daily_revenue", "v3") is None
        assert store.resolve_version("daily_revenue", V2.version_id) == V2
        assert store.resolve_version("daily_revenue", "a1") == V1
        assert store.resolve_version("daily_revenue", "b2000") == V2
        assert store.resolve_version("daily_revenue", "c") is None
        assert store.resolve_version("monthly_revenue", "v1") is None
        assert store.resolve_version("monthly_revenue", "a1") is None

    def test_an_ambiguous_prefix_resolves_to_nothing(self, store: StateStore) -> None:
        first = version("abc1" + "0" * 60, 1)
        second = version("abc2" + "0" * 60, 2)
        store.save_version(first)
        store.save_version(second)
        assert store.resolve_version("daily_revenue", "abc") is None
        assert store.resolve_version("daily_revenue", "abc1") == first
        assert store.resolve_version("daily_revenue", "abc2") == second

    # deploys and events ------------------------------------------------------------------------

    def test_activate_keeps_the_previous_version(self, with_versions: StateStore) -> None:
        store = with_versions
        assert store.model_state("daily_revenue") is None
        store.activate("daily_revenue", V1.version_id, AT, deploy_event(V1.version_id))
        first = store.model_state("daily_revenue")
        assert first is not None
        assert (first.active_version, first.previous_version, first.paused, first.deployed_at) == (
            V1.version_id,
            None,
            False,
            AT,
        )
        store.activate("daily_revenue", V2.version_id, LATER, deploy_event(V2.version_id, LATER))
        second = store.model_state("daily_revenue")
        assert second is not None
        assert (second.active_version, second.previous_version, second.deployed_at) == (
            V2.version_id,
            V1.version_id,
            LATER,
        )
        # activating the active version again does not lose the way back
        store.activate("daily_revenue", V2.version_id, LATER, deploy_event(V2.version_id, LATER))
        third = store.model_state("daily_revenue")
        assert third is not None
        assert (third.active_version, third.previous_version) == (V2.version_id, V1.version_id)
        assert [s.model for s in store.model_states()] == ["daily_revenue"]

    def test_events_are_kept_in_order_with_their_details(self, with_versions: StateStore) -> None:
        store = with_versions
        build = Event(
            kind="build",
            actor="bob",
            at=AT,
            model="daily_revenue",
            version_id=V1.version_id,
            detail={"seq": 1},
        )
        store.record_event(build)
        store.activate("daily_revenue", V1.version_id, AT, deploy_event(V1.version_id))
        store.record_event(
            Event(kind="pause", actor="carol", at=LATER, model="daily_revenue", reason="incident")
        )
        store.record_event(Event(kind="build", actor="bob", at=AT, model="monthly_revenue"))
        events = store.events("daily_revenue")
        assert [e.kind for e in events] == ["build", "deploy", "pause"]
        assert events[0] == build
        assert events[1] == deploy_event(V1.version_id)
        assert events[2].detail == {}
        assert events[2].reason == "incident"
        assert [e.kind for e in store.events("monthly_revenue")] == ["build"]
        assert store.events("nobody") == []

    def test_events_come_back_in_the_order_recorded_not_by_their_time(
        self, with_versions: StateStore
    ) -> None:
        store = with_versions
        # `--as-of` stamps an event with any time; the ledger's order is when it was written
        store.record_event(Event(kind="pause", actor="carol", at=LATER, model="daily_revenue"))
        store.record_event(Event(kind="unpause", actor="carol", at=AT, model="daily_revenue"))
        assert [e.kind for e in store.events("daily_revenue")] == ["pause", "unpause"]
        assert [e.kind for e in store.recent_events()] == ["unpause", "pause"]

    def test_pausing_keeps_the_active_version_and_records_who_and_why(
        self, with_versions: StateStore
    ) -> None:
        store = with_versions
        pause = Event(kind="pause", actor="carol", at=LATER, model="daily_revenue", reason="bad")
        # a model never deployed can be paused too: nothing may run it until it is unpaused
        store.set_paused("daily_revenue", True, pause)
        paused = store.model_state("daily_revenue")
        assert paused is not None and (paused.paused, paused.active_version) == (True, None)
        store.activate("daily_revenue", V1.version_id, AT, deploy_event(V1.version_id))
        deployed = store.model_state("daily_revenue")
        assert deployed is not None and (deployed.paused, deployed.active_version) == (
            True,
            V1.version_id,
        )
        store.set_paused("daily_revenue", False, replace(pause, kind="unpause", reason=None))
        resumed = store.model_state("daily_revenue")
        assert resumed is not None and (resumed.paused, resumed.active_version) == (
            False,
            V1.version_id,
        )
        assert [(e.kind, e.reason) for e in store.events("daily_revenue")] == [
            ("pause", "bad"),
            ("deploy", "release"),
            ("unpause", None),
        ]

    def test_gates_read_back_whole_in_order(self, with_versions: StateStore) -> None:
        store = with_versions
        first = Gate(
            gate_id="gate-1",
            model="daily_revenue",
            version_id=V2.version_id,
            passed=False,
            flaky=False,
            inputs="d" * 64,
            partitions=("2025-01-01", "2025-03-09"),
            report={
                "partitions": [{"label": "2025-01-01", "checks": [{"name": "n", "passed": False}]}]
            },
            actor="alice",
            created_at=AT,
        )
        second = replace(first, gate_id="gate-2", passed=True, flaky=True, created_at=LATER)
        store.record_gate(
            second, Event(kind="gate", actor="alice", at=LATER, model="daily_revenue")
        )
        store.record_gate(first, Event(kind="gate", actor="alice", at=AT, model="daily_revenue"))
        # in the order recorded, whatever their stamps say (a stamp may be backdated)
        assert store.gates("daily_revenue") == [second, first]
        assert store.gates("monthly_revenue") == []
        assert [e.kind for e in store.events("daily_revenue")] == ["gate", "gate"]

    def test_the_confirming_run_is_the_first_to_publish_the_version_after_the_deploy(
        self, with_versions: StateStore
    ) -> None:
        store = with_versions

        def published(attempt_id: str, run_id: str, version_id: str, started_at: str) -> None:
            store.create_attempt(
                replace(attempt(attempt_id, run_id, 0, version_id), started_at=started_at)
            )
            for state in FORWARD:
                store.move_attempt(attempt_id, state, started_at, rows=1, checksum="1:01")
            store.publish(attempt_id, started_at)

        store.create_run(run(RUN_A))
        store.create_run(run(RUN_B))
        assert store.confirming_run("daily_revenue") is None
        published("att-v1-before", RUN_A, V1.version_id, LATER)
        store.activate("daily_revenue", V1.version_id, AT, deploy_event(V1.version_id))
        # published before the deploy, though stamped later: not a confirmation of it
        assert store.confirming_run("daily_revenue") is None
        published("att-v2", RUN_A, V2.version_id, LATER)
        assert store.confirming_run("daily_revenue") is None  # another version
        # a backdated run (stamped before the deploy) still confirms it: ledger order counts
        published("att-v1-after", RUN_B, V1.version_id, "2024-01-01T00:00:00.000000+00:00")
        assert store.confirming_run("daily_revenue") == RUN_B
        store.activate("daily_revenue", V2.version_id, LATER, deploy_event(V2.version_id))
        assert store.confirming_run("daily_revenue") is None

    # runs --------------------------------------------------------------------------------------

    def test_runs_are_created_finished_and_found(self, with_versions: StateStore) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        store.create_run(run(RUN_B))
        assert store.get_run(RUN_A) == run(RUN_A)
        assert [r.run_id for r in store.live_runs()] == [RUN_A, RUN_B]
        store.finish_run(RUN_A, RunStatus.FAILED, "1 of 3 partition(s) not published", LATER)
        finished = store.get_run(RUN_A)
        assert finished is not None
        assert (finished.status, finished.reason, finished.ended_at) == (
            RunStatus.FAILED,
            "1 of 3 partition(s) not published",
            LATER,
        )
        assert finished.params == {"batch_size": 2, "stale_only": False}
        assert [r.run_id for r in store.live_runs()] == [RUN_B]
        store.finish_run(RUN_B, RunStatus.SUCCEEDED, None, LATER)
        assert store.live_runs() == []
        assert store.get_run("run-missing") is None

    def test_a_run_ends_with_the_history_events_it_records(self, with_versions: StateStore) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        ended = Event(
            kind="recover",
            actor="bob",
            at=LATER,
            model="monthly_revenue",
            run_id=RUN_A,
            detail={"partitions": ["2025-01"]},
        )
        store.finish_run(RUN_A, RunStatus.SUCCEEDED, None, LATER, events=[ended])
        assert store.events("monthly_revenue") == [ended]
        assert store.live_runs() == []

    def test_last_run_is_the_newest_that_made_an_attempt(self, with_versions: StateStore) -> None:
        store = with_versions
        assert store.last_run("daily_revenue") is None
        store.create_run(run(RUN_A))
        store.create_run(run(RUN_B))
        assert store.last_run("daily_revenue") is None  # no attempt yet
        store.create_attempt(attempt("att-1", RUN_A))
        last = store.last_run("daily_revenue")
        assert last is not None and last.run_id == RUN_A
        store.create_attempt(attempt("att-2", RUN_B, day=1))
        last = store.last_run("daily_revenue")
        assert last is not None and last.run_id == RUN_B
        assert store.last_run("monthly_revenue") is None

    # attempts and the partitions read model ----------------------------------------------------

    def test_an_attempt_moves_and_publishes(self, with_versions: StateStore) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        store.create_attempt(attempt("att-1"))
        pending = store.partition("daily_revenue", T0)
        assert pending is not None
        assert (pending.last_attempt_id, pending.last_state) == ("att-1", AttemptState.PENDING)
        assert (pending.version_id, pending.attempt_id, pending.published_at) == (None, None, None)
        assert [a.attempt_id for a in store.live_attempts()] == ["att-1"]

        store.move_attempt("att-1", AttemptState.RUNNING, AT)
        store.move_attempt("att-1", AttemptState.STAGED, AT)
        store.move_attempt("att-1", AttemptState.AUDITED, AT, rows=4, checksum="4:00000000000000ff")
        audited = store.get_attempt("att-1")
        assert audited is not None
        assert (audited.state, audited.rows, audited.checksum, audited.ended_at) == (
            AttemptState.AUDITED,
            4,
            "4:00000000000000ff",
            None,
        )
        assert store.partition("daily_revenue", T0).last_state is AttemptState.AUDITED  # type: ignore[union-attr]

        store.publish("att-1", LATER)
        published = store.get_attempt("att-1")
        assert published is not None
        assert (published.state, published.ended_at) == (AttemptState.PUBLISHED, LATER)
        part = store.partition("daily_revenue", T0)
        assert part is not None
        assert (
            part.version_id,
            part.run_id,
            part.attempt_id,
            part.rows,
            part.checksum,
            part.published_at,
            part.last_state,
            part.partition_end,
            part.grain,
        ) == (
            V1.version_id,
            RUN_A,
            "att-1",
            4,
            "4:00000000000000ff",
            LATER,
            AttemptState.PUBLISHED,
            T0 + DAY_SECONDS,
            "day",
        )
        assert store.live_attempts() == []
        assert [a.attempt_id for a in store.attempts_of_run(RUN_A)] == ["att-1"]

    def test_published_content_replaces_what_was_staged(self, with_versions: StateStore) -> None:
        """A merge leaves its partition holding more than it staged: the ledger records the
        partition's rows and checksum, as its commit marker does."""
        store = with_versions
        store.create_run(run(RUN_A))
        store.create_attempts([attempt("att-1"), attempt("att-2", day=1)])
        for attempt_id in ("att-1", "att-2"):
            for state in (AttemptState.RUNNING, AttemptState.STAGED):
                store.move_attempt(attempt_id, state, AT)
            store.move_attempt(attempt_id, AttemptState.AUDITED, AT, rows=2, checksum="2:0a")
        # one not audited refuses the whole call: nothing is recorded
        store.create_attempt(attempt("att-3", day=2))
        with pytest.raises(IllegalTransition):
            store.record_published_content({"att-1": (5, "5:0b"), "att-3": (1, "1:0c")})
        assert store.get_attempt("att-1").checksum == "2:0a"  # type: ignore[union-attr]

        store.record_published_content({"att-1": (5, "5:0b")})
        store.record_published_content({"att-1": (5, "5:0b")})  # idempotent
        store.publish_many(["att-1", "att-2"], LATER)
        first, second = (
            store.partition("daily_revenue", T0),
            store.partition("daily_revenue", T0 + DAY_SECONDS),
        )
        assert first is not None and (first.rows, first.checksum) == (5, "5:0b")
        assert second is not None and (second.rows, second.checksum) == (2, "2:0a")
        published = store.get_attempt("att-1")
        assert published is not None and (published.rows, published.checksum) == (5, "5:0b")
        # a published attempt's content is settled
        with pytest.raises(IllegalTransition):
            store.record_published_content({"att-1": (6, "6:0d")})

    def test_a_later_failed_attempt_keeps_what_was_published(
        self, with_versions: StateStore
    ) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        store.create_attempt(attempt("att-1"))
        self.publish_through(store, "att-1", 4, "4:00000000000000ff")

        store.create_run(run(RUN_B))
        store.create_attempt(attempt("att-2", RUN_B, version_id=V2.version_id))
        running = store.partition("daily_revenue", T0)
        assert running is not None
        assert (running.last_attempt_id, running.last_state) == ("att-2", AttemptState.PENDING)
        assert (running.attempt_id, running.version_id) == ("att-1", V1.version_id)

        store.move_attempt("att-2", AttemptState.RUNNING, LATER)
        store.move_attempt(
            "att-2", AttemptState.FAILED, LATER, error="check unique failed: 2 key(s) repeated"
        )
        failed = store.partition("daily_revenue", T0)
        assert failed is not None
        assert (failed.last_attempt_id, failed.last_state, failed.last_error) == (
            "att-2",
            AttemptState.FAILED,
            "check unique failed: 2 key(s) repeated",
        )
        assert (
            failed.version_id,
            failed.run_id,
            failed.attempt_id,
            failed.rows,
            failed.checksum,
        ) == (
            V1.version_id,
            RUN_A,
            "att-1",
            4,
            "4:00000000000000ff",
        )
        gone = store.get_attempt("att-2")
        assert gone is not None
        assert (gone.state, gone.error, gone.ended_at) == (
            AttemptState.FAILED,
            "check unique failed: 2 key(s) repeated",
            LATER,
        )

        # a third attempt starts clean: the old error is not carried over
        store.create_attempt(attempt("att-3", RUN_B, version_id=V2.version_id))
        fresh = store.partition("daily_revenue", T0)
        assert fresh is not None
        assert (fresh.last_state, fresh.last_error) == (AttemptState.PENDING, None)

    def test_a_late_publish_of_an_older_attempt_does_not_hide_the_newer_one(
        self, with_versions: StateStore
    ) -> None:
        """Reconciliation publishes an old attempt from its marker; the newer attempt stays last."""
        store = with_versions
        store.create_run(run(RUN_A))
        store.create_attempt(attempt("att-1"))
        for state in (AttemptState.RUNNING, AttemptState.STAGED):
            store.move_attempt("att-1", state, AT)
        store.move_attempt("att-1", AttemptState.AUDITED, AT, rows=1, checksum="1:01")
        store.create_attempt(attempt("att-2", version_id=V2.version_id))
        store.publish("att-1", AT)
        part = store.partition("daily_revenue", T0)
        assert part is not None
        assert (part.attempt_id, part.last_attempt_id, part.last_state) == (
            "att-1",
            "att-2",
            AttemptState.PENDING,
        )

    def test_live_attempts_are_the_unfinished_ones(self, with_versions: StateStore) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        for day, state in enumerate(
            [AttemptState.RUNNING, AttemptState.STAGED, AttemptState.AUDITED, AttemptState.FAILED]
        ):
            store.create_attempt(attempt(f"att-{day}", day=day))
            for step in FORWARD[: FORWARD.index(state) + 1] if state in FORWARD else [state]:
                store.move_attempt(f"att-{day}", step, AT)
        store.create_attempt(attempt("att-9", day=9))  # pending
        store.create_attempt(attempt("att-8", day=8))
        store.move_attempt("att-8", AttemptState.SKIPPED, AT, error="upstream not ready")
        store.create_attempt(attempt("att-7", day=7))
        self.publish_through(store, "att-7", 1, "1:0000000000000001")
        live = store.live_attempts()
        assert [a.attempt_id for a in live] == ["att-0", "att-1", "att-2", "att-9"]
        assert [a.state for a in live] == [
            AttemptState.RUNNING,
            AttemptState.STAGED,
            AttemptState.AUDITED,
            AttemptState.PENDING,
        ]

    def test_partition_counts(self, with_versions: StateStore) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        # days 0-2 published by v1, days 3-4 by v2, day 5 failed never published,
        # day 6 running, day 1 republish by v2 failed afterwards (still published by v1)
        for day in range(3):
            store.create_attempt(attempt(f"a1-{day}", day=day))
            self.publish_through(store, f"a1-{day}", 1, "1:0000000000000001")
        for day in (3, 4):
            store.create_attempt(attempt(f"a2-{day}", day=day, version_id=V2.version_id))
            self.publish_through(store, f"a2-{day}", 1, "1:0000000000000001")
        store.create_attempt(attempt("f-5", day=5, version_id=V2.version_id))
        store.move_attempt("f-5", AttemptState.FAILED, AT, error="boom")
        store.create_attempt(attempt("r-6", day=6, version_id=V2.version_id))
        store.move_attempt("r-6", AttemptState.RUNNING, AT)
        store.create_attempt(attempt("f-1", day=1, version_id=V2.version_id))
        store.move_attempt("f-1", AttemptState.FAILED, AT, error="boom")

        assert store.partition_counts("daily_revenue", V2.version_id) == {
            "published": 2,
            "stale": 3,
            "failed": 2,
            "running": 1,
            "known": 7,
        }
        assert store.partition_counts("daily_revenue", V1.version_id) == {
            "published": 3,
            "stale": 2,
            "failed": 2,
            "running": 1,
            "known": 7,
        }
        assert store.partition_counts("daily_revenue", None)["stale"] == 5
        assert store.partition_counts("monthly_revenue", V1.version_id) == {
            "published": 0,
            "stale": 0,
            "failed": 0,
            "running": 0,
            "known": 0,
        }
        window = store.partitions("daily_revenue", T0 + DAY_SECONDS, T0 + 4 * DAY_SECONDS)
        assert [p.partition_start for p in window] == [T0 + d * DAY_SECONDS for d in (1, 2, 3)]

    # checks and inputs -------------------------------------------------------------------------

    def test_checks_are_recorded_and_read_back_in_order(self, with_versions: StateStore) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        store.create_attempt(attempt("att-1"))
        results = [
            CheckResult("contract", "contract", Severity.BLOCKING, True, "0", "ok"),
            CheckResult("unique_d", "unique", Severity.BLOCKING, False, "2", "2 key(s) repeated"),
            CheckResult("n_not_null", "not_null", Severity.WARN, False, "1", "1 row(s) violate it"),
        ]
        store.record_checks("att-1", results)
        assert store.checks("att-1") == results
        assert store.checks("att-other") == []

    def test_the_checks_of_a_run_are_read_at_once_by_attempt(
        self, with_versions: StateStore
    ) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        store.create_run(run(RUN_B))
        store.create_attempt(attempt("att-1"))
        store.create_attempt(attempt("att-2", day=1))
        store.create_attempt(attempt("att-3", run_id=RUN_B))
        passed = CheckResult("contract", "contract", Severity.BLOCKING, True, "0", "ok")
        failed = CheckResult("unique_d", "unique", Severity.BLOCKING, False, "2", "2 repeated")
        store.record_checks("att-1", [passed, failed])
        store.record_checks("att-2", [passed])
        store.record_checks("att-3", [failed])
        assert store.checks_of_run(RUN_A) == {"att-1": [passed, failed], "att-2": [passed]}
        assert store.checks_of_run(RUN_B) == {"att-3": [failed]}
        assert store.checks_of_run("run-20250104T000000000000Z-cccccc") == {}

    def test_reconciliations_are_recorded_in_any_state_and_replaced_by_name(
        self, with_versions: StateStore
    ) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        store.create_attempt(attempt("att-1"))  # pending: an update audits in its publish
        store.record_reconciliations(
            "att-1", [ReconciliationResult("net_revenue", "10", "9", "0", False)]
        )
        again = [ReconciliationResult("net_revenue", "10", "10", "0", True)]
        store.record_reconciliations("att-1", again)
        assert store.reconciliations("att-1") == again

    def test_inputs_are_recorded_and_read_back(self, with_versions: StateStore) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        store.create_attempt(attempt("att-1"))
        inputs = [
            Input("orders_clean", "model", T0, T0 + DAY_SECONDS, None, ("att-x", "att-y")),
            Input("orders", "source", T0, T0 + DAY_SECONDS, "12:00000000000000ab"),
        ]
        store.record_inputs("att-1", inputs)
        assert sorted(store.inputs("att-1"), key=lambda i: i.upstream) == sorted(
            inputs, key=lambda i: i.upstream
        )
        assert store.inputs("att-other") == []

    # backfill support ----------------------------------------------------------------------

    def test_intervals_checkpoints_and_segments(self, with_versions: StateStore) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        # days 0-2 and 5 published by v1 in RUN_A, day 3 by v2, day 4 failed
        for day, version in ((0, V1), (1, V1), (2, V1), (5, V1), (3, V2)):
            store.create_attempt(attempt(f"att-{day}", day=day, version_id=version.version_id))
            self.publish_through(store, f"att-{day}", 1, "1:0000000000000001")
        store.create_attempt(attempt("att-4", day=4))
        store.move_attempt("att-4", AttemptState.FAILED, AT, error="boom")
        day = DAY_SECONDS
        assert store.published_intervals("daily_revenue", T0, T0 + 10 * day) == [
            (T0, T0 + 4 * day),
            (T0 + 5 * day, T0 + 6 * day),
        ]
        assert store.published_intervals("daily_revenue", T0, T0 + 10 * day, V1.version_id) == [
            (T0, T0 + 3 * day),
            (T0 + 5 * day, T0 + 6 * day),
        ]
        assert store.run_checkpoints(RUN_A, "daily_revenue") == [
            (T0, T0 + 4 * day),
            (T0 + 5 * day, T0 + 6 * day),
        ]
        # the newest partition a version published before a moment: v1's day 2 before day 5
        # (day 3 is v2's, day 4 failed), its day 5 before day 10; nothing before the first day
        newest = store.newest_published_end
        assert newest("daily_revenue", T0 + 10 * day, V1.version_id) == T0 + 6 * day
        assert newest("daily_revenue", T0 + 5 * day, V1.version_id) == T0 + 3 * day
        assert newest("daily_revenue", T0 + 10 * day, V2.version_id) == T0 + 4 * day
        assert newest("daily_revenue", T0, V1.version_id) is None
        assert newest("other_model", T0 + 10 * day, V1.version_id) is None
        counts, segments = store.segments("daily_revenue", V1.version_id)
        assert counts == store.partition_counts("daily_revenue", V1.version_id)
        assert counts["published"] == 4 and counts["stale"] == 1 and counts["failed"] == 1
        assert [(s[0], s[2], s[3]) for s in segments] == [
            ("published", 3, T0),
            ("stale", 1, T0 + 3 * day),
            ("failed", 1, T0 + 4 * day),
            ("published", 1, T0 + 5 * day),
        ]
        _, first_two = store.segments("daily_revenue", V1.version_id, limit=2)
        assert len(first_two) == 2

    def test_stop_requests_and_reopening_a_run(self, with_versions: StateStore) -> None:
        store = with_versions
        store.create_run(run(RUN_A))
        assert not store.stop_requested(RUN_A)
        store.request_stop(RUN_A, AT)
        store.request_stop(RUN_A, "2030-01-01T00:00:00+00:00")  # idempotent: the first stays
        assert store.stop_requested(RUN_A)
        found = store.get_run(RUN_A)
        assert found is not None and found.stop_requested_at == AT
        store.finish_run(RUN_A, RunStatus.STOPPED, "stopped", AT, trigger=None)
        store.reopen_run(RUN_A, 4242)
        reopened = store.get_run(RUN_A)
        assert reopened is not None
        assert (reopened.status, reopened.pid, reopened.stop_requested_at) == (
            RunStatus.RUNNING,
            4242,
            None,
        )
        assert [r.run_id for r in store.runs()] == [RUN_A]
        assert store.runs(kind="no such kind") == []

    # outbox ---------------------------------------------------------------------------------
    # Events waiting for delivery to notification targets (tidegate.notify.outbox).

    def test_outbox_rows_are_queued_in_order_and_due_at_once(self, store: StateStore) -> None:
        ids = store.add_outbox(
            [("hook", '{"n":1}'), ("journal", '{"n":2}'), ("hook", '{"n":3}')], AT
        )
        assert ids == sorted(ids) and len(set(ids)) == 3
        assert [
            (r.id, r.target, r.payload, r.created_at, r.attempts, r.next_attempt_at)
            for r in store.outbox()
        ] == [
            (ids[0], "hook", '{"n":1}', AT, 0, AT),
            (ids[1], "journal", '{"n":2}', AT, 0, AT),
            (ids[2], "hook", '{"n":3}', AT, 0, AT),
        ]
        assert all(r.delivered_at is None and r.last_error is None for r in store.outbox())
        assert [r.id for r in store.outbox(target="hook")] == [ids[0], ids[2]]
        assert store.add_outbox([], AT) == []

    def test_outbox_claims_only_the_due_head_of_a_target(self, store: StateStore) -> None:
        latest = "2025-01-02T02:00:00.000000+00:00"
        first, second = store.add_outbox([("hook", "1"), ("hook", "2")], AT)
        claimed = store.claim_outbox("hook", AT, LATER)
        assert claimed is not None
        assert (claimed.id, claimed.attempts, claimed.next_attempt_at) == (first, 1, LATER)
        # claimed: not due again before LATER, and the second row may not overtake it
        assert store.claim_outbox("hook", AT, LATER) is None
        store.mark_outbox_failed(first, "HTTP 503 Service Unavailable", LATER)
        failed = store.outbox()[0]
        assert (
            failed.attempts,
            failed.last_error,
            failed.next_attempt_at,
            failed.delivered_at,
        ) == (
            1,
            "HTTP 503 Service Unavailable",
            LATER,
            None,
        )
        assert store.claim_outbox("hook", AT, LATER) is None
        assert store.claim_outbox("elsewhere", latest, latest) is None
        again = store.claim_outbox("hook", LATER, latest)
        assert again is not None and (again.id, again.attempts) == (first, 2)
        store.mark_outbox_delivered(first, LATER)
        store.mark_outbox_delivered(first, latest)  # the first delivery time stays
        store.mark_outbox_failed(first, "too late", latest)  # a delivered row is not reopened
        done = store.outbox()[0]
        assert (done.delivered_at, done.last_error, done.attempts) == (
            LATER,
            "HTTP 503 Service Unavailable",
            2,
        )
        assert [r.id for r in store.outbox(pending_only=True)] == [second]
        after = store.claim_outbox("hook", LATER, latest)
        assert after is not None and after.id == second
