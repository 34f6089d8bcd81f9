"""tidegate needs no superuser: a warehouse role that may only connect, create schemas in its
database, create tables in the published schema and read the sources (SECURITY.md's role)
builds, validates, deploys, backfills, reruns, taints, recovers, verifies and reports — with its
ledger in the same database under the same role. The role cannot read server files: the
warehouse itself refuses what the build-time check refuses."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from tests.engines.postgres_kit import admin, fresh_database, postgres_project, rows
from tests.kit import EXAMPLE_MODELS, Result, tidegate

pytestmark = pytest.mark.postgres

SETUP = (
    ("build",),
    ("validate", "daily_revenue"),
    *(("deploy", model) for model in EXAMPLE_MODELS),
)
BACKFILL = ("daily_revenue", "--partitions", "2025-01-01..2025-01-31", "--batch-size", "16")
AFTER = (
    ("backfill", "monthly_revenue", "--partitions", "2025-01..2025-01"),
    ("taint", "daily_revenue", "--partitions", "2025-01-04..2025-01-04", "--reason", "role test"),
    ("recover", "daily_revenue"),
    ("verify", "--checksums"),
    ("status",),
    ("show", "partition", "daily_revenue", "2025-01-03"),
)


@pytest.fixture
def role_project(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """The orders example whose warehouse and ledger are reached as a plain login role."""
    with fresh_database() as dsn:
        project = postgres_project(tmp_path / "project", dsn, rows_per_day=2, deploy=False)
        role = f"tg_role_{uuid.uuid4().hex[:12]}"
        database = urlsplit(dsn).path.lstrip("/")
        with admin(dsn) as con:
            con.execute(
                sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE").format(
                    sql.Identifier(role)
                )
            )
            for grant in (
                "GRANT CONNECT, CREATE, TEMPORARY ON DATABASE {db} TO {role}",
                "GRANT USAGE, CREATE ON SCHEMA public TO {role}",
                "GRANT SELECT ON public.orders TO {role}",
            ):
                con.execute(
                    sql.SQL(grant).format(db=sql.Identifier(database), role=sql.Identifier(role))
                )
        as_role = urlunsplit(
            urlsplit(dsn)._replace(
                netloc=f"{role}@{urlsplit(dsn).hostname}:{urlsplit(dsn).port or 5432}"
            )
        )
        config = project / "tidegate.toml"
        text = config.read_text().replace(dsn, as_role)
        state = '[state]\npath = ".tidegate/state.db"\n'
        assert state in text
        config.write_text(text.replace(state, f'[state]\nurl = "{as_role}"\n'))
        try:
            yield project, as_role
        finally:
            with admin(dsn) as con:
                con.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            with admin() as con:
                con.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def succeeded(project: Path, *step: str) -> Result:
    result = tidegate(*step, "--project", project)
    assert result.exit_code == 0, (step, result.stdout[-1500:], result.stderr)
    return result


def test_a_plain_role_does_everything_tidegate_does(role_project: tuple[Path, str]) -> None:
    project, as_role = role_project
    [(superuser,)] = rows(as_role, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    assert superuser is False
    for step in SETUP:
        succeeded(project, *step)
    run_id = succeeded(project, "backfill", *BACKFILL, "--json").json()["run_id"]
    succeeded(project, "rerun", run_id, "--partitions", "2025-01-03..2025-01-03", "--approve", "x")
    for step in AFTER:
        succeeded(project, *step)
    succeeded(project, "report", "--out", str(project / "report.html"))
    status = tidegate("status", "--project", project, "--json").json()
    daily = next(m for m in status["models"] if m["model"] == "daily_revenue")
    assert daily["partitions"]["tainted"] == 0, daily
    assert daily["partitions"]["published"] >= 31, daily
    published = rows(
        as_role,
        "SELECT count(DISTINCT order_date) FROM public.daily_revenue "
        "WHERE order_date < DATE '2025-02-01'",
    )
    assert published == [(31,)]


def test_the_role_cannot_reach_server_files(role_project: tuple[Path, str]) -> None:
    _, as_role = role_project
    for statement in (
        "SELECT pg_read_file('postgresql.conf')",
        "SELECT lo_import('/etc/hostname')",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            rows(as_role, statement)
