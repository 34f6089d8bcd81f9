"""The shared ledger: PostgreSQL passes the StateStore contracts, migrates once under a lock,
refuses a newer schema, and keeps concurrent processes apart (outbox claims, taints against
publishes). Marker `postgres`: `pytest -m postgres` runs them, `-m "not postgres"` skips them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest
from psycopg import sql

from tests.faults.ledger import wait_until
from tests.report.store_contract import ReportStoreContract, assert_one_snapshot
from tests.state.contract import (
    AT,
    LATER,
    RUN_A,
    RUN_B,
    T0,
    V1,
    StateStoreContract,
    attempt,
    run,
)
from tests.state.cursor_contract import CursorStoreContract
from tests.state.postgres_kit import (
    POSTGRES_URL,
    admin,
    drop_schema,
    fresh_schema,
    open_store,
    unique_name,
)
from tests.state.queue_contract import QueueStoreContract
from tests.state.stream_contract import StreamStoreContract
from tests.state.taint_contract import (
    DAY,
    MONTH_END,
    ORDER,
    PARENTS,
    TaintStoreContract,
    _publish,
    publish,
    taint,
)
from tidegate.domain.attempt import AttemptState
from tidegate.domain.errors import BusyError, OperationFailed, StateStoreError, UsageError
from tidegate.domain.run import Attempt, Input
from tidegate.state.base import StateStore
from tidegate.state.postgres import PostgresStateStore
from tidegate.state.postgres_attempts import publish_one
from tidegate.state.postgres_connect import PostgresTarget
from tidegate.state.postgres_migrate import SCHEMA_VERSION, migrations
from tidegate.state.postgres_taints import MARKS_LOCK, hold_marks

pytestmark = pytest.mark.postgres

FAR = "2999-01-01T00:00:00.000000+00:00"


def waiting_for_marks(schema: str) -> bool | None:
    """True once a session waits for the marks lock of `schema` (see MARKS_LOCK)."""
    with admin() as con:
        row = con.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid = %s AND objid = hashtext(%s)::oid",
            (MARKS_LOCK, schema),
        ).fetchone()
    return True if row and row[0] else None


def month(attempt_id: str, run_id: str = RUN_A) -> Attempt:
    """An attempt at January of monthly_revenue."""
    return replace(
        attempt(attempt_id, run_id), model="monthly_revenue", grain="month", partition_end=MONTH_END
    )


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


@pytest.fixture
def pg_store(schema: str) -> Iterator[PostgresStateStore]:
    opened = open_store(schema)
    try:
        yield opened
    finally:
        opened.close()


class TestPostgres(
    StateStoreContract,
    TaintStoreContract,
    QueueStoreContract,
    CursorStoreContract,
    StreamStoreContract,
):
    @pytest.fixture
    def store(self, pg_store: PostgresStateStore) -> StateStore:
        return pg_store


class TestPostgresReport(ReportStoreContract):
    @pytest.fixture
    def store(self, pg_store: PostgresStateStore) -> StateStore:
        return pg_store


def applied(schema: str) -> list[int]:
    with admin() as con:
        rows = con.execute(
            sql.SQL("SELECT version FROM {}.schema_migrations ORDER BY 1").format(
                sql.Identifier(schema)
            )
        ).fetchall()
    return [int(r[0]) for r in rows]


# migrations ---------------------------------------------------------------------------------


def test_a_new_store_is_migrated_once_and_reopened_as_it_is(schema: str) -> None:
    store = open_store(schema)
    store.save_version(V1)
    store.create_run(run(RUN_A))
    store.close()
    assert applied(schema) == [n for n, _ in migrations()]
    assert applied(schema)[-1] == SCHEMA_VERSION

    again = open_store(schema)
    try:
        assert again.get_version(V1.version_id) == V1
        assert again.get_run(RUN_A) == run(RUN_A)
    finally:
        again.close()
    assert applied(schema) == [n for n, _ in migrations()]


def test_a_store_from_a_newer_tidegate_is_refused(schema: str) -> None:
    open_store(schema).close()
    with admin() as con:
        con.execute(
            sql.SQL("INSERT INTO {}.schema_migrations (version) VALUES (%s)").format(
                sql.Identifier(schema)
            ),
            (SCHEMA_VERSION + 1,),
        )
    with pytest.raises(StateStoreError) as raised:
        open_store(schema)
    error = raised.value
    assert isinstance(error, UsageError) and error.exit_code == 2
    assert "upgrade" in str(error) and f"v{SCHEMA_VERSION + 1}" in str(error)
    assert schema in str(error) and len(str(error).splitlines()) == 1
    assert applied(schema)[-2:] == [SCHEMA_VERSION, SCHEMA_VERSION + 1]


def test_concurrent_first_opens_migrate_once(schema: str) -> None:
    """Eight processes' connections open a new ledger at the same instant: one migrates under
    the advisory lock, the others wait and find it done."""
    count = 8
    start = threading.Barrier(count)
    opened: list[PostgresStateStore] = []
    failures: list[BaseException] = []

    def open_one() -> None:
        start.wait()
        try:
            opened.append(open_store(schema))
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=open_one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert failures == [] and len(opened) == count
        assert applied(schema) == [n for n, _ in migrations()]
        opened[0].save_version(V1)
        assert all(s.get_version(V1.version_id) == V1 for s in opened)
    finally:
        for store in opened:
            store.close()


# concurrency ------------------------------------------------------------------------------


def test_a_claimed_head_is_skipped_not_waited_for_nor_overtaken(
    pg_store: PostgresStateStore, schema: str
) -> None:
    first, second = pg_store.add_outbox([("hook", "1"), ("hook", "2")], AT)
    with admin() as con, con.transaction():
        # another delivery holds the head row (its claim transaction is in flight)
        con.execute(
            sql.SQL("SELECT * FROM {}.outbox WHERE id = %s FOR UPDATE").format(
                sql.Identifier(schema)
            ),
            (first,),
        )
        found: list[object] = []
        claiming = threading.Thread(
            target=lambda: found.append(pg_store.claim_outbox("hook", LATER, FAR))
        )
        claiming.start()
        claiming.join(5)
        assert not claiming.is_alive()  # SKIP LOCKED: no waiting for the holder
        assert found == [None]  # and not the second row either
    claimed = pg_store.claim_outbox("hook", LATER, FAR)
    assert claimed is not None and (claimed.id, claimed.attempts) == (first, 1)
    assert [r.id for r in pg_store.outbox(pending_only=True)] == [first, second]


def test_concurrent_deliveries_never_claim_one_row_twice(schema: str) -> None:
    """Two deliveries, each with its own connection, drain three targets at once: every row is
    claimed exactly once, and each target's rows in their order."""
    targets = ("hook", "journal", "audit")
    stores = [open_store(schema) for _ in range(2)]
    try:
        ids = stores[0].add_outbox([(t, str(n)) for n in range(25) for t in targets], AT)
        claims: list[tuple[str, int]] = []
        record = threading.Lock()
        start = threading.Barrier(len(stores))

        def deliver(store: PostgresStateStore) -> None:
            start.wait()
            idle = 0
            while idle < 50:
                progressed = False
                for target in targets:
                    row = store.claim_outbox(target, LATER, FAR)
                    if row is None:
                        continue
                    with record:
                        claims.append((target, row.id))
                    store.mark_outbox_delivered(row.id, LATER)
                    progressed = True
                idle = 0 if progressed else idle + 1

        threads = [threading.Thread(target=deliver, args=(s,)) for s in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        claimed = [row_id for _, row_id in claims]
        assert sorted(claimed) == sorted(ids)  # each row once, none left
        for target in targets:
            mine = [row_id for t, row_id in claims if t == target]
            assert mine == sorted(mine)
        assert all(r.attempts == 1 and r.delivered_at for r in stores[0].outbox())
    finally:
        for store in stores:
            store.close()


def test_a_publish_in_flight_cannot_slip_past_a_taint(schema: str) -> None:
    """A month is being published from tainted days while the taint is declared: the taint
    waits for the publish and marks what it published (read committed alone would miss it)."""
    tainter, publisher = open_store(schema), open_store(schema)
    try:
        tainter.save_version(V1)
        tainter.create_run(run(RUN_A))
        for day in range(3):
            publish(tainter, f"att-d{day}", day)
        publisher.create_attempt(month("att-m0"))
        publisher.record_inputs(
            "att-m0", [Input("daily_revenue", "model", T0, MONTH_END, None, ("att-d1",))]
        )
        for state in (AttemptState.RUNNING, AttemptState.STAGED):
            publisher.move_attempt("att-m0", state, AT)
        publisher.move_attempt("att-m0", AttemptState.AUDITED, AT, rows=1, checksum="1:0a")

        marks: list[object] = []
        with publisher._tx() as con:  # the publish, held open mid-transaction
            hold_marks(con, exclusive=False)
            publish_one(con, "att-m0", LATER)
            declared = threading.Thread(
                target=lambda: marks.extend(
                    tainter.taint(taint("taint-1", T0, T0 + 3 * DAY), ORDER, PARENTS)
                )
            )
            declared.start()
            wait_until("the taint to wait for the marks lock", lambda: waiting_for_marks(schema))
            assert declared.is_alive()  # waiting for the publish to commit
        declared.join(30)
        assert not declared.is_alive()
        assert ("monthly_revenue", "att-m0") in [
            (t.mark.model, t.mark.attempt_id) for t in tainter.open_taints()
        ]
    finally:
        tainter.close()
        publisher.close()


def test_a_publish_waits_for_a_taint_and_inherits_its_marks(schema: str) -> None:
    tainter, publisher = open_store(schema), open_store(schema)
    try:
        tainter.save_version(V1)
        tainter.create_run(run(RUN_A))
        publish(tainter, "att-d0", 0)
        tainter.create_run(run(RUN_B))
        publisher.create_attempt(month("att-m0", RUN_B))
        publisher.record_inputs(
            "att-m0", [Input("daily_revenue", "model", T0, MONTH_END, None, ("att-d0",))]
        )
        with tainter._tx() as con:  # a taint holds the marks lock, its marks not committed
            hold_marks(con, exclusive=True)
            con.execute(
                "INSERT INTO taints VALUES ('taint-1', 'daily_revenue', 'day', %s, %s, "
                "'dup load', 'alice', %s)",
                (T0, T0 + DAY, AT),
            )
            con.execute(
                "INSERT INTO tainted_partitions (taint_id, model, partition_start, "
                "partition_end, attempt_id, depth, marked_at) "
                "VALUES ('taint-1', 'daily_revenue', %s, %s, 'att-d0', 0, %s)",
                (T0, T0 + DAY, AT),
            )
            published = threading.Thread(target=lambda: _publish(publisher, "att-m0"))
            published.start()
            wait_until("the publish to wait for the marks lock", lambda: waiting_for_marks(schema))
            # the state moves went ahead; the publish itself waits for the taint
            assert published.is_alive()
        published.join(30)
        assert not published.is_alive()
        [mark] = publisher.open_taints("monthly_revenue")
        assert (mark.mark.attempt_id, mark.mark.depth) == ("att-m0", 1)
    finally:
        tainter.close()
        publisher.close()


def test_reading_sees_one_snapshot_while_another_process_writes(schema: str) -> None:
    reader, writer = open_store(schema), open_store(schema)
    try:
        assert_one_snapshot(reader, writer)
    finally:
        reader.close()
        writer.close()


# reaching the server ------------------------------------------------------------------------


def test_a_server_that_is_down_is_one_line_exit_2() -> None:
    down = POSTGRES_URL.replace(":5432/", ":1/") if ":5432/" in POSTGRES_URL else None
    assert down is not None, "TIDEGATE_TEST_POSTGRES must name port 5432 for this test"
    with pytest.raises(StateStoreError) as raised:
        PostgresStateStore(PostgresTarget(down, "tidegate_state"))
    assert raised.value.exit_code == 2
    assert len(str(raised.value).splitlines()) == 1
    assert "postgresql://" in str(raised.value) and "cannot connect" in str(raised.value)


def test_a_server_out_of_connections_is_busy_exit_4() -> None:
    role = unique_name("tg_busy")
    with admin() as con:
        con.execute(sql.SQL("CREATE ROLE {} LOGIN CONNECTION LIMIT 0").format(sql.Identifier(role)))
    try:
        url = POSTGRES_URL.replace("://postgres@", f"://{role}@")
        with pytest.raises(BusyError) as raised:
            PostgresStateStore(PostgresTarget(url, "tidegate_state"))
        assert raised.value.exit_code == 4
        assert len(str(raised.value).splitlines()) == 1 and "busy" in str(raised.value)
    finally:
        with admin() as con:
            con.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_the_password_comes_from_the_named_variable_and_is_never_shown() -> None:
    secret = "s3cret-" + unique_name("pw")
    down = POSTGRES_URL.replace(":5432/", ":1/")
    target = PostgresTarget(down, "tidegate_state", password_env="TIDEGATE_TEST_PASSWORD")
    with pytest.raises(UsageError) as missing:
        PostgresStateStore(target, env={})
    assert "TIDEGATE_TEST_PASSWORD" in str(missing.value)
    assert target.connect_args({"TIDEGATE_TEST_PASSWORD": secret})["password"] == secret
    with pytest.raises(StateStoreError) as raised:
        PostgresStateStore(target, env={"TIDEGATE_TEST_PASSWORD": secret})
    assert secret not in str(raised.value) and secret not in repr(target)
    # trust authentication ignores a password: the variable is used when it is set
    ok = PostgresTarget(POSTGRES_URL, unique_name("tg_test"), "TIDEGATE_TEST_PASSWORD")
    try:
        PostgresStateStore(ok, env={"TIDEGATE_TEST_PASSWORD": secret}).close()
    finally:
        drop_schema(ok.schema)


def test_threads_of_one_process_do_not_queue_behind_one_transaction(
    pg_store: PostgresStateStore,
) -> None:
    """A backfill's workers and its publisher each take a connection of their own."""
    pg_store.save_version(V1)
    found: list[object] = []
    with pg_store._tx() as con:  # this thread's transaction stays open
        con.execute("SELECT 1")
        reader = threading.Thread(target=lambda: found.append(pg_store.get_version(V1.version_id)))
        reader.start()
        reader.join(10)
        assert not reader.is_alive() and found == [V1]


def test_a_connection_the_server_dropped_is_replaced(pg_store: PostgresStateStore) -> None:
    pg_store.create_run(run(RUN_A))
    with pg_store._pool.session() as con:
        pid = con.info.backend_pid
    with admin() as con:
        con.execute("SELECT pg_terminate_backend(%s)", (pid,))
    # the statement failed, not the configuration: exit 1, and what was running resumes
    with pytest.raises(OperationFailed) as raised:
        pg_store.get_run(RUN_A)
    assert raised.value.exit_code == 1
    assert len(str(raised.value).splitlines()) == 1 and "connection was lost" in str(raised.value)
    assert pg_store.get_run(RUN_A) == run(RUN_A)  # the next call connects again
