"""Start-up stays light: help and the ledger readers import no engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("duckdb", "pyspark", "pyarrow", "pandas", "polars", "psycopg")
PROBE = """
import sys
from tidegate.cli import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    assert done.code in (0, None), done.code
print("HEAVY=" + ",".join(m for m in {heavy!r} if m in sys.modules))
"""


def imported_heavy(*args: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
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


def test_the_probe_would_see_an_engine(project: Path) -> None:
    # The same probe notices DuckDB when a command does need the warehouse.
    assert "duckdb" in imported_heavy(
        "run", "daily_revenue", "--partition", "2025-01-01", "--project", str(project)
    )
