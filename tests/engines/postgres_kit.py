"""The PostgreSQL warehouse the `postgres` tests use: a database of its own per test, on the
server of TIDEGATE_TEST_POSTGRES (default: 127.0.0.1:5432, user postgres), named uniquely (the
suite runs in parallel) and dropped afterwards. Without a server the tests fail, never skip."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from tests.kit import EXAMPLE_MODELS, example_project, tidegate
from tidegate.engines.postgres import load_example

SERVER = os.environ.get("TIDEGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@contextmanager
def admin(dsn: str = SERVER) -> Iterator[psycopg.Connection[Any]]:
    """A plain autocommit session, for what tests set up and inspect."""
    con = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    try:
        yield con
    finally:
        con.close()


@contextmanager
def fresh_database(prefix: str = "tg_wh") -> Iterator[str]:
    """The DSN of a new, empty database named `prefix` and a random suffix, dropped afterwards
    (with whatever sessions are left)."""
    name = f"{prefix}_{uuid.uuid4().hex[:16]}"
    with admin() as con:
        con.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(urlsplit(SERVER)._replace(path="/" + name))
    finally:
        with admin() as con:
            con.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def rows(dsn: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    with admin(dsn) as con:
        return [tuple(r) for r in con.execute(query, params).fetchall()]


def postgres_config(dsn: str, schema: str | None = None, password_env: str | None = None) -> str:
    lines = ['engine = "postgres"', f'dsn = "{dsn}"']
    if schema is not None:
        lines.append(f'schema = "{schema}"')
    if password_env is not None:
        lines.append(f'password_env = "{password_env}"')
    return "\n".join(lines) + "\n"


def use_postgres(project: Path, dsn: str, **options: str | None) -> None:
    """Point a project's [warehouse] at PostgreSQL (its DuckDB file goes)."""
    config = project / "tidegate.toml"
    duckdb_section = 'engine = "duckdb"\npath = "warehouse.duckdb"\n'
    text = config.read_text()
    assert duckdb_section in text
    config.write_text(text.replace(duckdb_section, postgres_config(dsn, **options)))
    for leftover in project.glob("warehouse.duckdb*"):
        leftover.unlink()


def postgres_project(
    target: Path, dsn: str, rows_per_day: int = 20, seed: int = 1, deploy: bool = True
) -> Path:
    """The orders example on a PostgreSQL warehouse: the same generated orders as the DuckDB
    example, built and (by default) every model deployed through the CLI."""
    example_project(target, rows_per_day, seed, deploy=False)
    shutil.rmtree(target / ".tidegate", ignore_errors=True)
    use_postgres(target, dsn)
    assert load_example(dsn, rows_per_day=rows_per_day, seed=seed) == 365 * rows_per_day
    if deploy:
        built = tidegate("build", "--project", target)
        assert built.exit_code == 0, built.stderr
        for model in EXAMPLE_MODELS:
            result = tidegate("deploy", model, "--project", target)
            assert result.exit_code == 0, result.stderr
    return target
