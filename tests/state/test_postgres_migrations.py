"""The same migrations for both ledgers: migrations_postgres/ has the numbers of migrations/, and
after each number both stores have the same tables with the same columns (name, nullability and
kind of value), so a ledger means the same in SQLite and in PostgreSQL.

PostgreSQL's only extras stand for what SQLite has built in: a `rowid` column in the tables read
in insertion order (SQLite's implicit rowid), and `ledger_clock` (SQLite's data_version)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from psycopg import sql

from tests.state.postgres_kit import admin, fresh_schema
from tidegate.state import postgres_migrate, sqlite

pytestmark = pytest.mark.postgres

Columns = dict[str, list[tuple[str, bool, str]]]  # table → (column, not null, kind), by name

PG_ONLY_TABLES = {"ledger_clock"}
PG_ONLY_COLUMN = "rowid"


def kind(declared: str) -> str:
    declared = declared.lower()
    if "int" in declared:
        return "integer"
    if "text" in declared or "char" in declared:
        return "text"
    return declared


def sqlite_columns(upto: int) -> Columns:
    con = sqlite3.connect(":memory:")
    try:
        for number, script in sqlite.migrations():
            if number <= upto:
                con.executescript(script)
        tables = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        found: Columns = {}
        for table in tables:
            info = con.execute(
                'SELECT name, type, "notnull", pk FROM pragma_table_info(?)', (table,)
            )
            found[table] = sorted(
                # a PRIMARY KEY column is NOT NULL in PostgreSQL; in SQLite an INTEGER one is the
                # rowid (never NULL), and the others are by the ledger's own writes
                (name, bool(notnull) or bool(pk), kind(declared))
                for name, declared, notnull, pk in info
            )
        return found
    finally:
        con.close()


def postgres_columns(schema: str, upto: int) -> Columns:
    with admin() as con:
        with con.transaction():
            con.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            con.execute("SELECT set_config('search_path', quote_ident(%s), true)", (schema,))
            for number, script in postgres_migrate.migrations():
                if number <= upto:
                    con.execute(script)
        rows = con.execute(
            "SELECT table_name, column_name, is_nullable, data_type "
            "FROM information_schema.columns WHERE table_schema = %s",
            (schema,),
        ).fetchall()
    found: Columns = {}
    for table, column, nullable, declared in rows:
        if table in PG_ONLY_TABLES or column == PG_ONLY_COLUMN:
            continue
        found.setdefault(table, []).append((column, nullable == "NO", kind(declared)))
    return {table: sorted(columns) for table, columns in sorted(found.items())}


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


def test_both_ledgers_have_the_same_migration_numbers() -> None:
    numbers = [n for n, _ in sqlite.migrations()]
    assert [n for n, _ in postgres_migrate.migrations()] == numbers
    # increasing and unique; a number may be missing while it is reserved on another branch
    assert numbers == sorted(set(numbers)) and numbers[0] == 1
    assert postgres_migrate.SCHEMA_VERSION == sqlite.SCHEMA_VERSION


@pytest.mark.parametrize("upto", [n for n, _ in sqlite.migrations()])
def test_each_migration_makes_the_same_tables_and_columns(schema: str, upto: int) -> None:
    assert postgres_columns(schema, upto) == sqlite_columns(upto)


def test_the_extras_of_postgres_are_only_those_named(schema: str) -> None:
    postgres_columns(schema, postgres_migrate.SCHEMA_VERSION)
    with admin() as con:
        tables = {
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (schema,),
            )
        }
        with_rowid = {
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.columns "
                "WHERE table_schema = %s AND column_name = 'rowid'",
                (schema,),
            )
        }
    assert tables - set(sqlite_columns(sqlite.SCHEMA_VERSION)) == PG_ONLY_TABLES
    # the tables the ledger reads in insertion order (ORDER BY rowid in both stores)
    assert with_rowid == {"attempts", "check_results", "reconciliations", "gates"}
