"""PostgreSQL, a warehouse on a server: the Engine contract plus what only it has — the row
hash computed from md5 like the documented one, UNLOGGED staging that a crash may leave and the
next writer drops, one writer per warehouse database (an advisory lock), cancellation, and
connection settings that never show a secret. Each test gets a database of its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.engines.contract import DAY1, DAY1_ROWS, EngineContract, select_rows
from tests.engines.postgres_kit import admin, fresh_database, rows
from tests.kit import warehouse_rows
from tidegate.domain.checksum import MODULUS, Checksum, row_hash
from tidegate.domain.errors import BusyError, UsageError
from tidegate.domain.model import CheckSpec, Column, Severity
from tidegate.engines.base import Engine, Target, bound_values
from tidegate.engines.duckdb import DuckDBEngine
from tidegate.engines.postgres import PostgresEngine, load_example
from tidegate.engines.postgres_connection import Warehouse, warehouse_of

pytestmark = pytest.mark.postgres


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_database() as found:
        yield found


class TestPostgres(EngineContract):
    @pytest.fixture
    def engine(self, dsn: str) -> Iterator[Engine]:
        opened = PostgresEngine(Warehouse(dsn))
        try:
            yield opened
        finally:
            opened.close()

    def test_name_and_capabilities(self, engine: Engine) -> None:
        assert engine.name == "postgres"
        assert engine.capabilities.transactional_publish
        assert engine.capabilities.single_writer_process
        assert engine.version().split(".")[0].isdigit()

    def test_its_tables_are_never_frozen(self, ready: Engine) -> None:
        # other sessions or jobs may write them while tidegate reads: no read-ahead
        self.publish_rows(ready, DAY1_ROWS)
        assert not ready.frozen_while_open("events")


@pytest.fixture
def pg(dsn: str) -> Iterator[PostgresEngine]:
    opened = PostgresEngine(Warehouse(dsn))
    opened.prepare()
    try:
        yield opened
    finally:
        opened.close()


def stage_texts(engine: PostgresEngine, name: str, values: list[tuple[str, str]]) -> None:
    body = ", ".join(f"('{a}', '{b}')" for a, b in values)
    engine.stage(name, f"SELECT * FROM (VALUES {body}) AS t(a, b)", {})


# --- the checksum: the documented row hash, summed mod 2^64 --------------------------------------


def test_the_checksum_is_the_sum_of_documented_row_hashes_mod_2_64(pg: PostgresEngine) -> None:
    """For text values the canonical row is the same text on every engine: PostgreSQL's
    digest is then exactly the documented one (its signed hashes wrap to the same sum)."""
    values = [("1", "a"), ("2", "b"), ("2", "b"), ("x\u00e9", "\u2603"), ("", "n")]
    stage_texts(pg, "t", values)
    expected = sum(row_hash(v) for v in values) % MODULUS
    assert pg.checksum("t", ["a", "b"]) == Checksum(len(values), expected)


def test_the_checksum_does_not_overflow(pg: PostgresEngine) -> None:
    pg.stage(
        "big", "SELECT CAST(i AS VARCHAR) AS a, 'x' AS b FROM generate_series(0, 4999) AS g(i)", {}
    )
    expected = sum(row_hash((str(i), "x")) for i in range(5000)) % MODULUS
    assert pg.checksum("big", ["a", "b"]) == Checksum(5000, expected)


# --- staging --------------------------------------------------------------------------------------


def test_staging_is_unlogged_and_outside_the_published_schema(dsn: str, pg: PostgresEngine) -> None:
    pg.stage("s", select_rows(DAY1_ROWS), {})
    found = rows(
        dsn,
        "SELECT n.nspname, c.relname, c.relpersistence FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        "ORDER BY 1, 2",
    )
    assert found == [
        ("_tidegate", "commit_markers", "p"),
        ("_tidegate", "fences", "p"),
        ("_tidegate_staging", "s", "u"),
    ]


def test_a_crash_leaves_staging_that_the_next_writer_drops(dsn: str) -> None:
    crashed = PostgresEngine(Warehouse(dsn))
    crashed.prepare()
    crashed.stage("left_behind", select_rows(DAY1_ROWS), {})
    # the process dies: its session ends without dropping anything
    with admin() as con:
        con.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [dsn.rsplit("/", 1)[1]],
        )
    with pytest.raises(Exception):  # noqa: B017 - the dead session fails as psycopg sees fit
        crashed.staging_tables()
    crashed.close()
    assert rows(dsn, "SELECT count(*) FROM _tidegate_staging.left_behind") == [(3,)]
    successor = PostgresEngine(Warehouse(dsn))
    try:
        assert successor.staging_tables() == ["left_behind"]
        successor.prepare()
        assert successor.staging_tables() == []
    finally:
        successor.close()


def test_a_long_staging_name_keeps_its_own_table(pg: PostgresEngine) -> None:
    first, second = "m" * 60 + "__slot0", "m" * 60 + "__slot0_1"
    pg.stage(first, "SELECT 1 AS n", {})
    pg.stage(second, "SELECT 2 AS n UNION ALL SELECT 3", {})
    assert len(pg.staging_tables()) == 2
    assert pg.checksum(first, ["n"]).rows == 1
    assert pg.checksum(second, ["n"]).rows == 2
    assert pg.drop_staging(first) == 1
    assert pg.checksum(second, ["n"]).rows == 2


# --- transpiling the project dialect --------------------------------------------------------------


def test_models_are_transpiled_and_percent_signs_stay_text(pg: PostgresEngine) -> None:
    """DuckDB spellings (GROUP BY ALL, //, date_trunc) run; a `%` in a literal or as an operator
    reaches PostgreSQL as itself, next to the bound parameters."""
    pg.stage(
        "q",
        "SELECT CAST(date_trunc('month', CAST($start AS TIMESTAMP)) AS DATE) AS m, "
        "CAST(n // 2 AS BIGINT) AS half, CAST(n % 3 AS BIGINT) AS rest, "
        "'50%' AS label, count(*) AS c "
        "FROM (SELECT 7 AS n UNION ALL SELECT 7) AS t "
        "WHERE '%s' LIKE '%%s' GROUP BY ALL",
        {"start": datetime(2025, 3, 9, 12), "end": datetime(2025, 3, 10)},
    )
    columns = pg.staging_columns("q")
    assert [(c.name, c.type) for c in columns] == [
        ("m", "DATE"),
        ("half", "BIGINT"),
        ("rest", "BIGINT"),
        ("label", "TEXT"),
        ("c", "BIGINT"),
    ]
    found = rows(pg.warehouse.dsn, "SELECT * FROM _tidegate_staging.q")
    assert [tuple(str(v) for v in r) for r in found] == [("2025-03-01", "3", "1", "50%", "2")]


def test_percent_signs_in_declared_values_are_values(pg: PostgresEngine) -> None:
    pg.stage("p", "SELECT '100%' AS v UNION ALL SELECT '50%%' UNION ALL SELECT 'x'", {})
    check = CheckSpec(
        "v", "accepted_values", Severity.BLOCKING, {"column": "v", "values": ["100%"]}
    )
    assert pg.measure(check, "p", {}) == 2
    like = CheckSpec(
        "l", "expression", Severity.BLOCKING, {"expression": "v LIKE '%\\%' ESCAPE '\\'"}
    )
    assert pg.measure(like, "p", {}) == 1


def test_query_columns_plans_without_running(pg: PostgresEngine) -> None:
    began = time.monotonic()
    columns = pg.query_columns(
        "SELECT CAST($start AS TIMESTAMP) AS t, CAST(1.5 AS DECIMAL(9, 2)) AS d, "
        "CAST(pg_sleep(20) AS VARCHAR) AS slow",
        bound_values(DAY1),
    )
    assert time.monotonic() - began < 10
    assert [(c.name, c.type) for c in columns] == [
        ("t", "TIMESTAMP"),
        ("d", "DECIMAL(9, 2)"),
        ("slow", "TEXT"),
    ]


def test_an_unconstrained_numeric_is_not_a_contract_type(pg: PostgresEngine) -> None:
    pg.stage("n", "SELECT CAST(1.5 AS NUMERIC) * 2 AS x", {})
    assert [c.type for c in pg.staging_columns("n")] == ["NUMERIC"]


# --- one writer per warehouse database ------------------------------------------------------------


def test_a_second_writer_is_busy_and_readers_are_not(dsn: str, pg: PostgresEngine) -> None:
    with pytest.raises(BusyError) as raised:
        PostgresEngine(Warehouse(dsn))
    assert raised.value.exit_code == 4
    assert "--wait" in str(raised.value)
    assert dsn.rsplit("/", 1)[1] in str(raised.value)
    reader = PostgresEngine(Warehouse(dsn), read_only=True)
    try:
        assert reader.markers(["att-1"]) == {}
    finally:
        reader.close()
    # a worker handle of the writer is no second writer
    handle = pg.handle()
    handle.close()


def test_a_waiting_writer_says_so_once_then_gives_up(dsn: str, pg: PostgresEngine) -> None:
    told: list[str] = []
    with pytest.raises(BusyError):
        PostgresEngine(Warehouse(dsn), wait=True, wait_timeout=0.5, on_wait=told.append)
    assert len(told) == 1 and "waiting for warehouse" in told[0]


def test_a_waiting_writer_gets_the_warehouse_when_the_first_closes(dsn: str) -> None:
    first = PostgresEngine(Warehouse(dsn))
    timer = threading.Timer(0.5, first.close)
    timer.start()
    began = time.monotonic()
    second = PostgresEngine(Warehouse(dsn), wait=True, wait_timeout=30)
    try:
        assert time.monotonic() - began >= 0.4
    finally:
        second.close()
        timer.join()


def test_the_lock_is_per_database(dsn: str, pg: PostgresEngine) -> None:
    with fresh_database() as other:
        elsewhere = PostgresEngine(Warehouse(other))
        elsewhere.close()


def test_a_read_only_engine_writes_nothing(dsn: str, pg: PostgresEngine) -> None:
    reader = PostgresEngine(Warehouse(dsn), read_only=True)
    try:
        with pytest.raises(Exception, match="read-only"):
            reader.stage("s", "SELECT 1 AS n", {})
    finally:
        reader.close()


# --- cancellation ---------------------------------------------------------------------------------


def test_interrupt_cancels_the_running_statement(pg: PostgresEngine) -> None:
    handle = pg.handle()
    try:
        timer = threading.Timer(0.5, handle.interrupt)
        timer.start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            handle.stage("slow", "SELECT CAST(pg_sleep(30) AS VARCHAR) AS s", {})
        assert time.monotonic() - began < 10
        timer.join()
        assert pg.staging_tables() == []
    finally:
        handle.close()


# --- connections and secrets ----------------------------------------------------------------------


def test_an_unreachable_server_is_one_line_without_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TG_TEST_SECRET", "hunter2-secret")
    warehouse = warehouse_of(
        "postgresql://tidegate@127.0.0.1:1/nowhere", "public", "TG_TEST_SECRET"
    )
    assert warehouse.password == "hunter2-secret"
    assert "hunter2" not in repr(warehouse)
    with pytest.raises(UsageError) as raised:
        PostgresEngine(warehouse)
    message = str(raised.value)
    assert raised.value.exit_code == 2
    assert "\n" not in message and "hunter2" not in message
    assert message.startswith("cannot connect to warehouse postgresql://tidegate@127.0.0.1:1/")


def test_a_missing_password_variable_is_named() -> None:
    with pytest.raises(UsageError, match="TG_TEST_UNSET_VARIABLE"):
        warehouse_of("postgresql://u@h/db", "public", "TG_TEST_UNSET_VARIABLE")


def test_a_session_opened_with_a_password_keeps_it_out_of_sight(dsn: str) -> None:
    """The server here trusts local sessions and ignores the password: what is checked is that
    connecting with one works and that the engine shows it nowhere."""
    engine = PostgresEngine(Warehouse(dsn, password="not-stored-anywhere"))
    try:
        engine.prepare()
        assert "not-stored" not in repr(engine.warehouse)
    finally:
        engine.close()


def test_published_tables_go_to_the_configured_schema(dsn: str) -> None:
    with admin(dsn) as con:
        con.execute("CREATE SCHEMA analytics")
        con.execute("CREATE TABLE analytics.src (n BIGINT)")
        con.execute("INSERT INTO analytics.src VALUES (1), (2)")
        con.execute("CREATE TABLE public.src (n BIGINT)")
    engine = PostgresEngine(Warehouse(dsn, "analytics"))
    try:
        engine.prepare()
        # unqualified names are the warehouse schema's: the model reads analytics.src
        engine.stage("s", "SELECT n, CAST('2025-01-01' AS TIMESTAMP) AS ts FROM src", {})
        assert engine.checksum("s", ["n"]).rows == 2
        target = Target("out", (Column("n", "BIGINT"), Column("ts", "TIMESTAMP")), "ts", False)
        engine.publish(target, "s", bound_values(DAY1), [])
        assert engine.table_columns("out") is not None
    finally:
        engine.close()
    assert rows(dsn, "SELECT count(*) FROM analytics.out") == [(2,)]
    assert rows(dsn, "SELECT to_regclass('public.out') IS NULL") == [(True,)]


def test_a_source_table_of_another_schema_is_fingerprinted(dsn: str) -> None:
    """A source named `schema.table` (a dbt source outside the warehouse schema): its
    fingerprint reads that schema's table, as DuckDB's does, not one of that dotted name."""
    with admin(dsn) as con:
        con.execute("CREATE SCHEMA analytics")
        con.execute("CREATE SCHEMA raw")
        con.execute("CREATE TABLE raw.src (n BIGINT, ts TIMESTAMP)")
        con.execute(
            "INSERT INTO raw.src VALUES (1, '2025-01-01 01:00'), (2, '2025-01-01 02:00'), "
            "(3, '2025-01-02 01:00')"
        )
    engine = PostgresEngine(Warehouse(dsn, "analytics"))
    try:
        engine.prepare()
        assert engine.source_fingerprint("raw.src", "ts", bound_values(DAY1)).rows == 2
        assert engine.source_fingerprint("raw.src", "ts", {}).rows == 3
    finally:
        engine.close()


def test_the_example_orders_are_duckdbs_rows(dsn: str, tmp_path: Path) -> None:
    """load_example copies the rows `init --example orders` generates, into a new schema, once."""
    assert load_example(dsn, "raw", rows_per_day=3, seed=7) == 3 * 365
    duck = DuckDBEngine(tmp_path / "warehouse.duckdb")
    try:
        duck.load_reference_orders(3, 7)
    finally:
        duck.close()
    summary = "SELECT count(*), sum(order_id * gross_amount), max(order_ts), min(status) FROM "
    on_duckdb = warehouse_rows(tmp_path, summary + "orders")
    assert rows(dsn, summary + "raw.orders") == on_duckdb
    with pytest.raises(UsageError, match="holds a table orders already"):
        load_example(dsn, "raw", rows_per_day=3, seed=7)
    assert rows(dsn, "SELECT count(*) FROM raw.orders") == [(3 * 365,)]
