"""The jaffle fixture is a working plain dbt project: `dbt build` passes on DuckDB and PostgreSQL
with the rows an independent computation expects, its warn test warns, its singular test can
fail, and a compile told where to write leaves the project folder as it was."""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
from psycopg import sql

from tests.dbt import kit

pytestmark = pytest.mark.slow

DAYS = 5
# what plain dbt builds of each model (int_order_payments is ephemeral: no relation)
RELATION_KINDS = {
    "stg_customers": "VIEW",
    "stg_orders": "VIEW",
    "stg_payments": "VIEW",
    "orders": "BASE TABLE",
    "customers": "BASE TABLE",
    "daily_revenue": "BASE TABLE",
}


def expected_orders(days: int) -> set[tuple[Any, ...]]:
    """orders, computed in Python from the raw rows: (order_id, customer_id, ordered_at,
    status, amount, payment_count)."""
    raw = kit.raw_rows(days)
    cents: Counter[int] = Counter()
    count: Counter[int] = Counter()
    for _, order_id, _, _, amount_cents in raw["payments"]:
        cents[order_id] += amount_cents
        count[order_id] += 1
    return {
        (i, c, at, status, Decimal(cents[i]) / 100, count[i]) for i, c, at, status in raw["orders"]
    }


def expected_customers(days: int) -> set[tuple[Any, ...]]:
    """customers: (customer_id, name, first_order_at, order_count, lifetime_value)."""
    orders = expected_orders(days)
    out = set()
    for customer_id, name in kit.raw_rows(days)["customers"]:
        mine = [o for o in orders if o[1] == customer_id]
        first = min((o[2] for o in mine), default=None)
        out.add((customer_id, name, first, len(mine), sum((o[4] for o in mine), Decimal(0))))
    return out


def expected_daily_revenue(days: int) -> set[tuple[Any, ...]]:
    """daily_revenue: (order_date, status, order_count, revenue)."""
    groups: dict[tuple[Any, str], list[Decimal]] = {}
    for _, _, ordered_at, status, amount, _ in expected_orders(days):
        groups.setdefault((ordered_at.date(), status), []).append(amount)
    return {(d, s, len(a), sum(a, Decimal(0))) for (d, s), a in groups.items()}


def normalized(rows: list[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
    """Rows comparable across engines: numbers as Decimal at cents, timestamps naive."""
    out = set()
    for row in rows:
        values: list[Any] = []
        for value in row:
            if isinstance(value, Decimal | float):
                value = Decimal(str(value)).quantize(Decimal("0.01"))
            elif isinstance(value, datetime):
                value = value.replace(tzinfo=None)
            values.append(value)
        out.add(tuple(values))
    return out


def quantized(rows: set[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
    return normalized(list(rows))


MART_COLUMNS = {
    "orders": "order_id, customer_id, ordered_at, status, amount, payment_count",
    "customers": "customer_id, name, first_order_at, order_count, lifetime_value",
    "daily_revenue": "order_date, status, order_count, revenue",
}


def check_marts(read: dict[str, list[tuple[Any, ...]]]) -> None:
    """The marts as read from the warehouse equal the independent computation."""
    assert len(read["orders"]) == len(kit.raw_rows(DAYS)["orders"])
    assert normalized(read["orders"]) == quantized(expected_orders(DAYS))
    assert len(read["customers"]) == len(kit.CUSTOMERS)
    assert normalized(read["customers"]) == quantized(expected_customers(DAYS))
    assert normalized(read["daily_revenue"]) == quantized(expected_daily_revenue(DAYS))
    revenue = sum(Decimal(str(r[3])) for r in read["daily_revenue"])
    paid = sum(Decimal(p[4]) for p in kit.raw_rows(DAYS)["payments"]) / 100
    assert revenue == paid and paid > 0


def check_output(output: str) -> None:
    """The build's log: every test ran, the one warn test warned and nothing else did."""
    assert re.search(r"WARN 1 accepted_values_stg_payments_method\S*", output), output
    assert re.search(r"Done\. PASS=14 WARN=1 ERROR=0 SKIP=0", output), output
    assert f"Batch {DAYS} of {DAYS} OK" in output  # one batch a generated day, no more


def test_the_raw_data_is_deterministic_and_covers_what_the_fixture_tests() -> None:
    raw = kit.raw_rows(DAYS)
    assert raw == kit.raw_rows(DAYS)
    assert {o[3] for o in raw["orders"]} == set(kit.STATUSES)
    assert {p[3] for p in raw["payments"]} == set(kit.METHODS) >= {kit.WARNED_METHOD}
    paid = {p[1] for p in raw["payments"]}
    assert any(o[0] not in paid for o in raw["orders"])  # an order without payments
    day = {o[0]: o[2].date() for o in raw["orders"]}
    assert all(p[2].date() == day[p[1]] for p in raw["payments"])
    assert {o[2].date() for o in raw["orders"]} == {
        datetime(2025, 1, d + 1).date() for d in range(DAYS)
    }


def test_a_plain_dbt_build_on_duckdb_passes_with_the_expected_rows(tmp_path: Path) -> None:
    project = kit.copy_fixture(tmp_path / "jaffle")
    warehouse = tmp_path / "warehouse.duckdb"
    kit.load_raw_duckdb(warehouse, DAYS)
    done = kit.plain_build(project, DAYS, kit.duckdb_env(warehouse))
    assert done.returncode == 0, done.stdout
    check_output(done.stdout)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        kinds = dict(
            con.execute(
                "SELECT table_name, table_type FROM information_schema.tables"
                " WHERE table_schema = 'main'"
            ).fetchall()
        )
        read = {
            table: con.execute(f"SELECT {columns} FROM main.{table}").fetchall()
            for table, columns in MART_COLUMNS.items()
        }
    assert kinds == RELATION_KINDS
    check_marts(read)


@pytest.fixture
def postgres_schema() -> Iterator[str]:
    """A schema name of this test's own; it and its raw schema are dropped afterwards."""
    schema = f"tg_jaffle_{uuid.uuid4().hex[:12]}"
    try:
        yield schema
    finally:
        kit.drop_postgres_schemas(kit.POSTGRES, schema, f"{schema}_raw")


@pytest.mark.postgres
def test_a_plain_dbt_build_on_postgres_passes_with_the_expected_rows(
    tmp_path: Path, postgres_schema: str
) -> None:
    project = kit.copy_fixture(tmp_path / "jaffle")
    env = kit.postgres_env(postgres_schema)
    kit.load_raw_postgres(kit.POSTGRES, env["JAFFLE_RAW_SCHEMA"], DAYS)
    done = kit.plain_build(project, DAYS, env)
    assert done.returncode == 0, done.stdout
    check_output(done.stdout)
    with psycopg.connect(kit.POSTGRES, connect_timeout=10) as con:
        kinds = dict(
            con.execute(
                "SELECT table_name, table_type FROM information_schema.tables"
                " WHERE table_schema = %s",
                (postgres_schema,),
            ).fetchall()
        )
        read = {
            table: con.execute(
                sql.SQL("SELECT {} FROM {}").format(
                    sql.SQL(", ").join(sql.Identifier(c) for c in columns.split(", ")),
                    sql.Identifier(postgres_schema, table),
                )
            ).fetchall()
            for table, columns in MART_COLUMNS.items()
        }
    assert kinds == RELATION_KINDS
    check_marts(read)


def test_a_negative_amount_fails_the_singular_test_and_the_build(tmp_path: Path) -> None:
    project = kit.copy_fixture(tmp_path / "jaffle")
    warehouse = tmp_path / "warehouse.duckdb"
    kit.load_raw_duckdb(warehouse, DAYS)
    with duckdb.connect(str(warehouse)) as con:
        con.execute("UPDATE raw.payments SET amount_cents = -5000 WHERE id = 1")
    done = kit.plain_build(project, DAYS, kit.duckdb_env(warehouse))
    assert done.returncode == 1, done.stdout
    assert re.search(r"FAIL 1 assert_no_negative_amounts", done.stdout), done.stdout
    assert re.search(r"Done\. PASS=\d+ WARN=1 ERROR=1 ", done.stdout), done.stdout


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_compile_told_where_to_write_leaves_the_project_folder_alone(tmp_path: Path) -> None:
    project = kit.copy_fixture(tmp_path / "jaffle")
    before = listing(project)
    warehouse = tmp_path / "warehouse.duckdb"
    kit.load_raw_duckdb(warehouse, 1)
    target, logs = tmp_path / "target", tmp_path / "logs"
    done = kit.dbt_ok(
        project,
        "compile",
        "--full-refresh",
        "--target-path",
        str(target),
        "--log-path",
        str(logs),
        env=kit.duckdb_env(warehouse),
    )
    assert "Found 7 models, 9 data tests, 3 sources" in done.stdout, done.stdout
    assert listing(project) == before
    assert not (project / "target").exists() and not (project / "logs").exists()
    assert (target / "manifest.json").is_file() and (target / "partial_parse.msgpack").is_file()
    assert (logs / "dbt.log").is_file()
    compiled = (target / "compiled" / "jaffle" / "models" / "marts" / "orders.sql").read_text()
    assert "__dbt__cte__int_order_payments" in compiled  # the ephemeral model, inlined
    assert '"raw"."payments"' not in compiled and '"main"."stg_payments"' in compiled


def test_same_rows_duckdb_sees_a_missing_duplicate_and_a_changed_value(tmp_path: Path) -> None:
    files = {name: tmp_path / f"{name}.duckdb" for name in ("left", "same", "dup", "changed")}
    contents = {
        "left": [(1, "a"), (1, "a"), (2, "b")],
        "same": [(2, "b"), (1, "a"), (1, "a")],
        "dup": [(1, "a"), (2, "b"), (2, "b")],
        "changed": [(1, "a"), (1, "a"), (2, "c")],
    }
    for name, path in files.items():
        with duckdb.connect(str(path)) as con:
            con.execute('CREATE TABLE "odd ""name""" (id INTEGER, v VARCHAR)')
            con.executemany('INSERT INTO "odd ""name""" VALUES (?, ?)', contents[name])
    kit.same_rows_duckdb(files["left"], files["same"], 'odd "name"')
    for other in ("dup", "changed"):
        with pytest.raises(AssertionError, match="rows of"):
            kit.same_rows_duckdb(files["left"], files[other], 'odd "name"')
