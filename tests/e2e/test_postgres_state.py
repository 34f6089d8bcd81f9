"""The orders example with its ledger in PostgreSQL (`[state] url`) and its data in the DuckDB
warehouse: build, deploy, a backfill and status work as on the embedded SQLite ledger, and the
ledger lives in the database, not in the project folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from tests.kit import (
    EXAMPLE_MODELS,
    assert_exactly_once,
    example_project,
    oracle_daily_revenue,
    published_daily_revenue,
    run_process,
    tidegate,
)
from tests.state.postgres_kit import POSTGRES_URL, admin, fresh_database, unique_name

pytestmark = pytest.mark.postgres

AS_OF = "2025-03-01T00:00:00Z"
SQLITE_STATE = '[state]\npath = ".tidegate/state.db"\n'


def cli(project: Path, *args: str) -> Any:
    result = tidegate(*args, "--project", project, "--json", "--as-of", AS_OF)
    assert result.exit_code == 0, (args, result.stdout[-2000:], result.stderr)
    return result.json()  # every command's one document, a backfill's its result


def point_at(project: Path, state: str) -> None:
    toml = project / "tidegate.toml"
    text = toml.read_text()
    assert text.count(SQLITE_STATE) == 1
    toml.write_text(text.replace(SQLITE_STATE, state))


def story(project: Path) -> dict[str, Any]:
    """Build, deploy, backfill January of daily_revenue and publish its month; status."""
    cli(project, "build")
    for model in EXAMPLE_MODELS:
        cli(project, "deploy", model)
    backfill = cli(
        project,
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-01-01..2025-01-31",
        "--batch-size",
        "7",
        "--max-concurrency",
        "2",
    )
    assert backfill["status"] == "succeeded", backfill
    cli(project, "run", "monthly_revenue", "--partition", "2025-01")
    status: dict[str, Any] = cli(project, "status")
    return status


def summary(status: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (m["model"], m["active_version"]["seq"], m["deploy"]["state"], m["partitions"])
        for m in status["models"]
    ]


def test_the_orders_example_keeps_its_ledger_in_postgres(tmp_path: Path) -> None:
    embedded = example_project(tmp_path / "embedded", deploy=False)
    expected = summary(story(embedded))

    with fresh_database() as url:
        project = example_project(tmp_path / "shared", deploy=False)
        point_at(project, f'[state]\nurl = "{url}"\nschema = "ledger"\n')
        assert summary(story(project)) == expected
        assert not (project / ".tidegate" / "state.db").exists()

        # a process of its own reads the same ledger (psycopg imported only now)
        shown = run_process("status", "daily_revenue", "--project", project, "--as-of", AS_OF)
        assert shown.exit_code == 0, shown.stderr
        assert "running v1 since run" in shown.stdout

        with admin(url) as con:
            published = con.execute(
                "SELECT model, count(*) FROM ledger.partitions WHERE attempt_id IS NOT NULL "
                "GROUP BY model ORDER BY model"
            ).fetchall()
            runs = con.execute("SELECT kind, status FROM ledger.runs ORDER BY run_id").fetchall()
        assert published == [("daily_revenue", 31), ("monthly_revenue", 1)]
        assert [r[1] for r in runs] == ["succeeded", "succeeded"]

    january = [r for r in oracle_daily_revenue(project) if r[0].month == 1]
    assert_exactly_once(published_daily_revenue(project), january)


def test_a_ledger_server_that_refuses_is_one_line(tmp_path: Path) -> None:
    """Down: exit 2; out of connections (busy): exit 4. Never a traceback."""
    project = example_project(tmp_path / "proj", deploy=False)
    point_at(project, '[state]\nurl = "postgresql://postgres@127.0.0.1:1/test"\n')
    down = tidegate("status", "--project", project)
    assert down.exit_code == 2
    assert down.stderr.startswith("error: state store postgresql://postgres@127.0.0.1:1/test")
    assert len(down.stderr.splitlines()) == 1 and "Traceback" not in down.stderr

    role = unique_name("tg_busy")
    with admin() as con:
        con.execute(sql.SQL("CREATE ROLE {} LOGIN CONNECTION LIMIT 0").format(sql.Identifier(role)))
    try:
        refusing = POSTGRES_URL.replace("://postgres@", f"://{role}@")
        toml = project / "tidegate.toml"
        toml.write_text(
            toml.read_text().replace("postgresql://postgres@127.0.0.1:1/test", refusing)
        )
        busy = run_process("status", "--project", project)
        assert busy.exit_code == 4, busy.stderr
        assert len(busy.stderr.splitlines()) == 1 and "busy" in busy.stderr
    finally:
        with admin() as con:
            con.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
