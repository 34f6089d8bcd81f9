"""The jaffle fixture dbt project (tests/dbt/jaffle) and what tests need to run it with plain dbt:
a copy of it (dbt writes target/ and logs/ into its project folder unless told otherwise, and
tests never write into the repository), tidegate's dbt, deterministic raw data loaded into DuckDB
or PostgreSQL, the profile's environment, and a comparison of two DuckDB tables."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
from psycopg import sql
from sqlglot import exp

from tests.kit import Result, tidegate, tidegate_events
from tidegate.execution.dbt import VENV_VARIABLE, dbt_executable

FIXTURE = Path(__file__).parent / "jaffle"
SHARED_VENV = Path(os.environ.get("TMPDIR", "/tmp")) / "tidegate-test-dbt-venv"
POSTGRES = os.environ.get("TIDEGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
BEGIN = date(2025, 1, 1)  # the `begin` of the microbatch model `orders`

CUSTOMERS = ("Ada", "Babbage", "Curie", "Dijkstra", "Euler", "Fermat", "Gauss", "Hopper")
STATUSES = ("placed", "shipped", "completed", "returned")
METHODS = ("credit_card", "bank_transfer", "coupon", "gift_card")
WARNED_METHOD = "gift_card"  # left out of the accepted_values test on stg_payments.method (warn)

# the raw tables, their columns and types (the same names and types on DuckDB and PostgreSQL)
RAW_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "customers": (("id", "INTEGER"), ("name", "VARCHAR")),
    "orders": (
        ("id", "INTEGER"),
        ("customer_id", "INTEGER"),
        ("ordered_at", "TIMESTAMP"),
        ("status", "VARCHAR"),
    ),
    "payments": (
        ("id", "INTEGER"),
        ("order_id", "INTEGER"),
        ("paid_at", "TIMESTAMP"),
        ("method", "VARCHAR"),
        ("amount_cents", "INTEGER"),
    ),
}
MART_TABLES = ("orders", "daily_revenue", "customers")


def copy_fixture(destination: Path) -> Path:
    """A copy of the fixture at `destination` (which must not exist): the dbt project folder."""
    return Path(shutil.copytree(FIXTURE, destination))


def dbt_executable_for_tests() -> Path:
    """tidegate's dbt, in the venv the whole suite shares (installed once, under a lock)."""
    os.environ.setdefault(VENV_VARIABLE, str(SHARED_VENV))
    return dbt_executable(Path(os.environ.get("TMPDIR", "/tmp")))


def raw_rows(days: int, start: date = BEGIN) -> dict[str, list[tuple[object, ...]]]:
    """The raw tables' rows for `days` days from `start`, the same on every call: eight customers
    (the last never orders), 2 to 4 orders a day, 0 to 2 payments an order, each paid on its
    order's day; every status and every payment method occurs once there are two days."""
    customers: list[tuple[object, ...]] = [(i + 1, n) for i, n in enumerate(CUSTOMERS)]
    orders: list[tuple[object, ...]] = []
    payments: list[tuple[object, ...]] = []
    order_id = payment_id = 0
    for day in range(days):
        midnight = datetime.combine(start + timedelta(days=day), datetime.min.time())
        for n in range(2 + day % 3):
            order_id += 1
            ordered_at = midnight + timedelta(hours=8 + 3 * n, minutes=7 * order_id % 60)
            customer = 1 + order_id % (len(CUSTOMERS) - 1)
            orders.append((order_id, customer, ordered_at, STATUSES[order_id % len(STATUSES)]))
            for k in range(order_id % 3):
                payment_id += 1
                paid_at = ordered_at + timedelta(minutes=5 + 20 * k)  # the same day, by 23:00
                method = METHODS[payment_id % len(METHODS)]
                payments.append((payment_id, order_id, paid_at, method, 250 + 137 * payment_id))
    return {"customers": customers, "orders": orders, "payments": payments}


def _insert(table: str, columns: tuple[tuple[str, str], ...], placeholder: str) -> str:
    names = ", ".join(name for name, _ in columns)
    marks = ", ".join(placeholder for _ in columns)
    return f"INSERT INTO {table} ({names}) VALUES ({marks})"


def load_raw_duckdb(path: Path, days: int, schema: str = "raw") -> None:
    """Creates `schema` in the DuckDB file `path` (created if missing) with the raw tables, filled
    with `raw_rows(days)` (any tables already there are replaced)."""
    data = raw_rows(days)
    quoted = _duck_quote(schema)
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted}")
        for table, columns in RAW_TABLES.items():
            name = f"{quoted}.{_duck_quote(table)}"
            definition = ", ".join(f"{_duck_quote(c)} {t}" for c, t in columns)
            con.execute(f"CREATE OR REPLACE TABLE {name} ({definition})")
            con.executemany(_insert(name, columns, "?"), data[table])


def load_raw_postgres(dsn: str, schema: str, days: int) -> None:
    """Drops and creates `schema` on the server of `dsn`: the raw tables, `raw_rows(days)`."""
    data = raw_rows(days)
    with psycopg.connect(dsn, connect_timeout=10) as con:
        con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        con.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        for table, columns in RAW_TABLES.items():
            name = sql.Identifier(schema, table)
            definition = sql.SQL(", ").join(
                sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in columns
            )
            con.execute(sql.SQL("CREATE TABLE {} ({})").format(name, definition))
            insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                name,
                sql.SQL(", ").join(sql.Identifier(c) for c, _ in columns),
                sql.SQL(", ").join(sql.Placeholder() for _ in columns),
            )
            with con.cursor() as cursor:
                cursor.executemany(insert, data[table])


def drop_postgres_schemas(dsn: str, *schemas: str) -> None:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as con:
        for schema in schemas:
            con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def tidegate_schemas(dsn: str) -> set[str]:
    """The schemas of tidegate's own (`_tidegate`, `_tidegate_staging`, ...) in the database."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as con:
        rows = con.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", ["\\_tidegate%"]
        ).fetchall()
    return {r[0] for r in rows}


def drop_tidegate_leftovers(dsn: str, before: set[str], ledger: Path) -> None:
    """Drops tidegate's own schemas that were not in the database `before` (the test's run
    created them); from those that were, which are someone else's too, it deletes only the
    commit markers of the attempts in `ledger` (the test's project's state.db, if any)."""
    drop_postgres_schemas(dsn, *sorted(tidegate_schemas(dsn) - before))
    if "_tidegate" not in before or not ledger.is_file():
        return
    with sqlite3.connect(ledger) as state:
        attempts = [r[0] for r in state.execute("SELECT attempt_id FROM attempts")]
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as con:
        con.execute(
            sql.SQL("DELETE FROM {} WHERE attempt_id = ANY(%s)").format(
                sql.Identifier("_tidegate", "commit_markers")
            ),
            [attempts],
        )


def duckdb_env(path: Path, raw_schema: str = "raw") -> dict[str, str]:
    """The profile's environment for the `duckdb` target, the DuckDB file `path`."""
    return {"DBT_TARGET": "duckdb", "JAFFLE_DUCKDB": str(path), "JAFFLE_RAW_SCHEMA": raw_schema}


def postgres_env(schema: str, raw_schema: str | None = None) -> dict[str, str]:
    """The profile's environment for the `postgres` target: dbt builds into `schema` and reads
    the raw tables from `raw_schema` (by default `schema`_raw)."""
    return {
        "DBT_TARGET": "postgres",
        "JAFFLE_SCHEMA": schema,
        "JAFFLE_RAW_SCHEMA": raw_schema or f"{schema}_raw",
    }


def dbt(project: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The kit's dbt on `project` (its own profiles.yml): `dbt <args> --project-dir project
    --profiles-dir project [--target env's DBT_TARGET]`, stdout and stderr together."""
    command = [str(dbt_executable_for_tests()), *args]
    command += ["--project-dir", str(project), "--profiles-dir", str(project)]
    if "DBT_TARGET" in env and "--target" not in args:
        command += ["--target", env["DBT_TARGET"]]
    environment = {
        **os.environ,
        **env,
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DBT_USE_COLORS": "false",
    }
    return subprocess.run(
        command,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        check=False,
    )


def dbt_ok(project: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = dbt(project, *args, env=env)
    assert done.returncode == 0, f"dbt {' '.join(args)} exited {done.returncode}:\n{done.stdout}"
    return done


def plain_build_elsewhere(project: Path, days: int, env: dict[str, str], artifacts: Path) -> None:
    """Plain `dbt build` over the generated days, its target and logs under `artifacts`, not in
    the project; it must pass."""
    artifacts.mkdir(parents=True, exist_ok=True)
    dbt_ok(
        project,
        "build",
        *event_time_bounds(days),
        "--target-path",
        str(artifacts / "target"),
        "--log-path",
        str(artifacts / "logs"),
        env=env,
    )


def event_time_bounds(days: int, start: date = BEGIN) -> tuple[str, ...]:
    """The arguments that bound a microbatch build to the generated days (without them dbt
    builds every day from `begin` to now)."""
    end = start + timedelta(days=days)
    return ("--event-time-start", start.isoformat(), "--event-time-end", end.isoformat())


def plain_build(
    project: Path, days: int, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    """`dbt build` over exactly the generated days (whatever its exit code)."""
    return dbt(project, "build", *event_time_bounds(days), *args, env=env)


def _duck_quote(identifier: str) -> str:
    return exp.to_identifier(identifier, quoted=True).sql("duckdb")


def same_rows_duckdb(left_db: Path, right_db: Path, table: str, schema: str = "main") -> None:
    """Asserts `schema`.`table` holds the same rows (as a multiset) in both DuckDB files."""
    with duckdb.connect(":memory:") as con:
        con.execute(f"ATTACH {_duck_literal(str(left_db))} AS l (READ_ONLY)")
        con.execute(f"ATTACH {_duck_literal(str(right_db))} AS r (READ_ONLY)")
        name = f"{_duck_quote(schema)}.{_duck_quote(table)}"
        left, right = f"l.{name}", f"r.{name}"
        counts = [con.execute(f"SELECT count(*) FROM {t}").fetchone() for t in (left, right)]
        assert counts[0] == counts[1], f"{schema}.{table}: {counts[0]} rows against {counts[1]}"
        for one, other in ((left, right), (right, left)):
            extra = con.execute(
                f"SELECT * FROM {one} EXCEPT ALL SELECT * FROM {other} LIMIT 5"
            ).fetchall()
            assert not extra, f"{schema}.{table}: rows of {one} only: {extra}"


def _duck_literal(value: str) -> str:
    return exp.Literal.string(value).sql("duckdb")


def same_rows_postgres(dsn: str, left_schema: str, right_schema: str, table: str) -> None:
    """Asserts `table` holds the same rows (as a multiset) in both schemas of the database of
    `dsn`: the same count, and EXCEPT ALL empty both ways."""
    left, right = sql.Identifier(left_schema, table), sql.Identifier(right_schema, table)
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as con:
        counts = [
            con.execute(sql.SQL("SELECT count(*) FROM {}").format(t)).fetchone()
            for t in (left, right)
        ]
        assert counts[0] == counts[1], f"{table}: {counts[0]} rows against {counts[1]}"
        for one, other, name in ((left, right, left_schema), (right, left, right_schema)):
            extra = con.execute(
                sql.SQL("SELECT * FROM {} EXCEPT ALL SELECT * FROM {} LIMIT 5").format(one, other)
            ).fetchall()
            assert not extra, f"{table}: rows of {name} only: {extra}"


# --- tidegate controlling the fixture -------------------------------------------------------------

# the fixture's models in dependency order
MODELS = ("stg_customers", "stg_orders", "stg_payments", "orders", "daily_revenue", "customers")
# the whole-table models (no event time); the others are partitioned by day
WHOLE = ("stg_customers", "customers")
# a shop's ledger, under the folder its shop is made in
SHOP_LEDGER = Path("shop") / ".tidegate" / "state.db"


@dataclass(frozen=True)
class Shop:
    """A tidegate project (`root`) controlling a copy of the fixture (`dbt`), its warehouse
    the DuckDB file the profile's target builds into, holding `days` days of raw rows."""

    root: Path
    dbt: Path
    warehouse: Path
    days: int

    @property
    def window(self) -> str:
        return days_window(self.days)


@dataclass(frozen=True)
class PostgresShop:
    """A tidegate project (`root`) controlling a copy of the fixture (`dbt`) whose profile's
    `postgres` target builds into `schema` of the database of `dsn`, reading `days` days of raw
    rows from `raw_schema`."""

    root: Path
    dbt: Path
    dsn: str
    schema: str
    raw_schema: str
    days: int

    @property
    def window(self) -> str:
        return days_window(self.days)


def days_window(days: int) -> str:
    """The partitions of the generated days: `START..END` (inclusive)."""
    end = BEGIN + timedelta(days=days - 1)
    return f"{BEGIN.isoformat()}..{end.isoformat()}"


def duckdb_shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, days: int = 5) -> Shop:
    """`tidegate init --dbt` over a fresh copy of the fixture, with raw rows loaded. The
    profile's variables are set in this process (the CLI runs in it) and inherited by dbt."""
    root = tmp_path / "shop"
    root.mkdir()
    project = copy_fixture(root / "analytics")
    warehouse = root / "warehouse.duckdb"
    load_raw_duckdb(warehouse, days)
    monkeypatch.setenv(VENV_VARIABLE, str(SHARED_VENV))
    for name, value in duckdb_env(warehouse).items():
        monkeypatch.setenv(name, value)
    cli(root, "init", str(root), "--dbt", str(project), "--dbt-target", "duckdb")
    return Shop(root, project, warehouse, days)


def postgres_shop(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    schema: str,
    raw_schema: str,
    days: int = 5,
    dsn: str = POSTGRES,
) -> PostgresShop:
    """`tidegate init --dbt --dbt-target postgres` over a fresh copy of the fixture, building
    into `schema`, with raw rows loaded into `raw_schema` (dropped first if it exists). The
    profile's variables are set in this process (the CLI runs in it) and inherited by dbt."""
    root = tmp_path / "shop"
    root.mkdir()
    project = copy_fixture(root / "analytics")
    load_raw_postgres(dsn, raw_schema, days)
    monkeypatch.setenv(VENV_VARIABLE, str(SHARED_VENV))
    for name, value in postgres_env(schema, raw_schema).items():
        monkeypatch.setenv(name, value)
    cli(root, "init", str(root), "--dbt", str(project), "--dbt-target", "postgres")
    return PostgresShop(root, project, dsn, schema, raw_schema, days)


def release(shop: Shop | PostgresShop, models: tuple[str, ...] = MODELS) -> None:
    """Build, deploy and backfill every model, in dependency order, over the generated days."""
    cli(shop.root, "build")
    for model in models:
        cli(shop.root, "deploy", model)
    for model in models:
        window = "all" if model in WHOLE else shop.window
        cli(shop.root, "backfill", model, "--partitions", window)


def cli(root: Path, *args: str, code: int = 0) -> Result:
    """The tidegate CLI, in this process; `init` takes its folder, the rest `--project`."""
    found = tidegate(*args) if args[0] == "init" else tidegate(*args, "--project", root)
    assert found.exit_code == code, (args, found.stdout, found.stderr)
    return found


def cli_events(root: Path, *args: str, code: int = 0) -> Result:
    """`cli` with an --events-file: the result carries the progress events (`Result.events`)."""
    found = tidegate_events(*args, "--project", root)
    assert found.exit_code == code, (args, found.stdout, found.stderr)
    return found


def listing(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its content."""
    return {
        f.relative_to(folder).as_posix(): f.read_bytes()
        for f in sorted(folder.rglob("*"))
        if f.is_file()
    }


def assert_dbt_provenance(shown: dict[str, Any]) -> None:
    """`show partition orders DAY --json`: the dbt node and the fixture's tests as checks."""
    assert shown["published"]["version"]["dbt"]["node"] == "model.jaffle.orders"
    checks = {c["name"] for c in shown["published"]["checks"]}
    assert {
        "unique_orders_order_id",
        "not_null_orders_order_id",
        "assert_no_negative_amounts",
    } <= checks
    assert any(name.startswith("relationships_orders_customer_id") for name in checks)
