"""Start-up stays light: help and the ledger readers import no engine; the ledger readers of
a project whose files are unchanged since it was last loaded import neither the SQL parser nor
pydantic (they read the project cache)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("duckdb", "pyspark", "pyarrow", "pandas", "polars", "psycopg")
# what loading a project needs, and a ledger reader does not while the project cache holds it
LOADING = ("sqlglot", "pydantic", "tidegate.project.loader", "tidegate.project.config")
PROBE = """
import sys
from tidegate.cli import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    assert done.code in (0, None), done.code
print("HEAVY=" + ",".join(m for m in {heavy!r} if m in sys.modules))
"""


def imported_heavy(*args: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=heavy), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    line = next(x for x in result.stdout.splitlines() if x.startswith("HEAVY="))
    return [m for m in line.removeprefix("HEAVY=").split(",") if m]


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["status", "--help"]])
def test_help_imports_no_engine(args: list[str]) -> None:
    assert imported_heavy(*args) == []


def test_ledger_readers_import_no_engine(project: Path) -> None:
    assert imported_heavy("status", "--project", str(project)) == []
    assert imported_heavy("history", "daily_revenue", "--project", str(project)) == []


def test_ledger_readers_of_an_unchanged_project_do_not_load_it(project: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "tidegate", "backfill", "daily_revenue", "--partitions",
         "2025-01-01..2025-01-03", "--project", str(project)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    heavy = HEAVY + LOADING
    for args in (
        ["status"],
        ["status", "daily_revenue"],
        ["show", "partition", "daily_revenue", "2025-01-02"],
        ["history", "daily_revenue"],
    ):
        assert imported_heavy(*args, "--project", str(project), heavy=heavy) == [], args
    runs = subprocess.run(
        [sys.executable, "-m", "tidegate", "status", "--json", "--project", str(project)],
        check=True, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    run_id = next(
        m["last_run"]["run_id"] for m in json.loads(runs.stdout)["models"] if m["last_run"]
    )
    assert imported_heavy("show", "run", run_id, "--project", str(project), heavy=heavy) == []
    # the schedules' fires around now are known from the first status: no cron arithmetic
    assert imported_heavy("status", "--project", str(project), heavy=("croniter",)) == []
    # a changed model file: the readers load the project again (and cache it anew)
    model = project / "models" / "monthly_revenue.sql"
    model.write_text(model.read_text() + "\n")
    assert "sqlglot" in imported_heavy("status", "--project", str(project), heavy=heavy)
    assert imported_heavy("status", "--project", str(project), heavy=heavy) == []


def test_the_probe_would_see_an_engine(project: Path) -> None:
    # The same probe notices DuckDB when a command does need the warehouse.
    assert "duckdb" in imported_heavy(
        "run", "daily_revenue", "--partition", "2025-01-01", "--project", str(project)
    )
