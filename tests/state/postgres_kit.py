"""The PostgreSQL server the `postgres` tests use: TIDEGATE_TEST_POSTGRES, by default the one at
127.0.0.1:5432 (user postgres, database test). Each test gets a schema or a database of its own,
named uniquely (the suite runs in parallel) and dropped afterwards. Without a server the tests
fail, never skip: CI runs them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from tidegate.state.postgres import PostgresStateStore
from tidegate.state.postgres_connect import PostgresTarget

POSTGRES_URL = os.environ.get("TIDEGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


@contextmanager
def admin(url: str = POSTGRES_URL) -> Iterator[psycopg.Connection[Any]]:
    """A plain autocommit connection, for what the tests set up and inspect."""
    con = psycopg.connect(url, autocommit=True, connect_timeout=10)
    try:
        yield con
    finally:
        con.close()


def drop_schema(schema: str) -> None:
    with admin() as con:
        con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A schema name no other test uses; the schema (created by the store) is dropped after."""
    schema = unique_name("tg_test")
    try:
        yield schema
    finally:
        drop_schema(schema)


def open_store(schema: str) -> PostgresStateStore:
    return PostgresStateStore(PostgresTarget(POSTGRES_URL, schema))


@contextmanager
def fresh_database() -> Iterator[str]:
    """The URL of a new, empty database, dropped after."""
    name = unique_name("tg_test")
    with admin() as con:
        con.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(POSTGRES_URL)
    try:
        yield urlunsplit(parts._replace(path="/" + name))
    finally:
        with admin() as con:
            con.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
