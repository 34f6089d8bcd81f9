"""Secrets referenced from the environment never leave it: a password for the PostgreSQL
warehouse and ledger (password_env) and a webhook token (token_env) are planted, every command
runs (human and --json output, a failure with --debug included), and the secret is looked for in
everything tidegate wrote or said: stdout, stderr, every file in the project (events, notices,
the report), every row of the ledger and the warehouse's own tables, every webhook body, and the
UI's answers."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import sql

from tests.distributed.kit import shared_project
from tests.engines.postgres_kit import admin, fresh_database
from tests.faults.backfill_kit import running
from tests.faults.ledger import wait_until
from tests.kit import Hook, free_port, listening, run_process, tidegate

pytestmark = pytest.mark.postgres

SECRET = "Planted-s3cret-7f3a91"
TOKEN = "Planted-t0ken-c44e02"
MODEL = "daily_revenue"
RANGE = "2025-01-01..2025-01-03"


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_database() as found:
        yield found


def plant(project: Path, hook: Hook) -> None:
    config = project / "tidegate.toml"
    text = config.read_text()
    text = text.replace(
        'schema = "ledger"\n', 'schema = "ledger"\npassword_env = "TG_PLANTED_PW"\n'
    )
    text = text.replace(
        'engine = "postgres"\n', 'engine = "postgres"\npassword_env = "TG_PLANTED_PW"\n'
    )
    assert text.count("TG_PLANTED_PW") == 2, text
    text += (
        f'\n[[notify]]\nname = "finance_hook"\nkind = "http"\nurl = "{hook.url}"\n'
        'token_env = "TG_PLANTED_TOKEN"\nretry_base_seconds = 0.001\nretry_max_seconds = 0.001\n'
        '\n[[notify]]\nname = "lineage"\nkind = "file"\npath = "lineage.jsonl"\nlineage = true\n'
        '\n[[consumers]]\nname = "finance"\nmodel = "daily_revenue"\nnotify = "finance_hook"\n'
    )
    config.write_text(text)


def every_row(dsn: str) -> str:
    """Every row of every table tidegate has in the database (ledger and warehouse)."""
    found = []
    with admin(dsn) as con:
        tables = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
        for schema, table in tables:
            query = sql.SQL("SELECT * FROM {}.{}").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            rows = con.execute(query).fetchall()
            found.append(f"{schema}.{table}: {rows!r}")
    return "\n".join(found)


def test_a_planted_secret_appears_in_no_output(
    dsn: str, tmp_path: Path, hook: Hook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TG_PLANTED_PW", SECRET)
    monkeypatch.setenv("TG_PLANTED_TOKEN", TOKEN)
    hook.up.set()
    project = shared_project(tmp_path / "proj", dsn, rows_per_day=4)
    plant(project, hook)
    said: list[str] = []

    def say(*args: str, code: int | None = 0) -> None:
        for extra in ((), ("--json",)):
            done = tidegate(*args, *extra, "--project", project)
            if code is not None:
                assert done.exit_code == code, (args, extra, done)
            said.extend([done.stdout, done.stderr])

    say("build")
    say("backfill", MODEL, "--partitions", RANGE)
    [(run_id,)] = [
        r for r in admin_rows(dsn, "SELECT run_id FROM ledger.runs ORDER BY run_id LIMIT 1")
    ]
    say("status")
    say("status", MODEL)
    say("show", "run", run_id)
    say("show", "partition", MODEL, "2025-01-02")
    say("history", MODEL)
    say("backfill", "list")
    say("validate", MODEL, "--partitions", RANGE)
    say("diff", MODEL, "--left", "v1", "--right", "v1", "--partitions", RANGE)
    say("rerun", run_id, "--partitions", RANGE, "--dry-run")
    say("taint", MODEL, "--partitions", "2025-01-02", "--reason", "planted")
    say("recover", MODEL, code=None)
    say("deliver", code=None)
    say("report", "--out", str(project / "report.html"))
    # --debug prints the traceback, in a real process
    debug = run_process(
        "backfill", MODEL, "--partitions", "2025-02-30", "--debug", "--project", project
    )
    assert "Traceback" in debug.stderr
    said.extend([debug.stdout, debug.stderr])

    port = free_port()
    with running("ui", "--port", str(port), "--project", project) as ui:
        wait_until("the UI listens", lambda: listening(port), 30)
        for path in ("/", "/api/view", "/api/status", f"/api/run?id={run_id}"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as page:
                said.append(page.read().decode())
        ui.kill()
        said.extend(ui.stderr + ui.stdout)

    assert hook.received, "the webhook never heard of the run: the test would prove little"
    # the token went where it is meant to, and only there
    assert set(hook.authorizations) == {f"Bearer {TOKEN}"}
    files = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert project / "lineage.jsonl" in files and project / "report.html" in files
    everything = {
        "output": "\n".join(said),
        "webhook bodies": repr(hook.received),
        "database rows": every_row(dsn),
        **{str(p): b.decode("utf-8", "replace") for p, b in files.items()},
    }
    for secret in (SECRET, TOKEN):
        leaks = [where for where, text in everything.items() if secret in text]
        assert leaks == [], f"{secret} leaked into {leaks}"


def admin_rows(dsn: str, query: str) -> list[tuple[object, ...]]:
    with admin(dsn) as con:
        return [tuple(r) for r in con.execute(query).fetchall()]
