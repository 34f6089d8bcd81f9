"""[warehouse] in tidegate.toml: the embedded DuckDB file by default, or a PostgreSQL database
named by a DSN that never holds the password."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit import tidegate
from tidegate.project.config import read_project_file

SECRET = "hunter2-in-the-file"


KEY_MODEL = (
    '/* tidegate\ngrain = "key"\nkey_column = "k"\nkeys = ["a"]\n\n[columns]\n'
    'k = "VARCHAR NOT NULL"\n*/\nSELECT CAST($key AS VARCHAR) AS k\n'
)


def project_with(tmp_path: Path, warehouse: str) -> Path:
    (tmp_path / "tidegate.toml").write_text(f'[project]\nname = "x"\n\n[warehouse]\n{warehouse}\n')
    (tmp_path / "models").mkdir()
    return tmp_path


def test_the_default_is_duckdb(tmp_path: Path) -> None:
    (tmp_path / "tidegate.toml").write_text('[project]\nname = "x"\n')
    settings = read_project_file(tmp_path).warehouse
    assert (settings.engine, settings.path, settings.dsn) == ("duckdb", "warehouse.duckdb", None)


def test_a_postgres_warehouse(tmp_path: Path) -> None:
    project_with(
        tmp_path,
        'engine = "postgres"\ndsn = "postgresql://etl@db.internal:5432/lake"\n'
        'schema = "analytics"\npassword_env = "LAKE_PASSWORD"',
    )
    settings = read_project_file(tmp_path).warehouse
    assert settings.engine == "postgres"
    assert settings.dsn == "postgresql://etl@db.internal:5432/lake"
    assert settings.db_schema == "analytics"
    assert settings.password_env == "LAKE_PASSWORD"


def test_the_schema_defaults_to_public(tmp_path: Path) -> None:
    project_with(tmp_path, 'engine = "postgres"\ndsn = "postgres://etl@db/lake"')
    assert read_project_file(tmp_path).warehouse.db_schema == "public"


@pytest.mark.parametrize(
    ("warehouse", "line", "message"),
    [
        (f'engine = "postgres"\ndsn = "postgresql://etl:{SECRET}@db/lake"', 6, "warehouse.dsn: "),
        (f'engine = "postgres"\ndsn = "postgresql://etl@db/lake?password={SECRET}"', 6, "dsn"),
        ('engine = "postgres"\ndsn = "mysql://etl@db/lake"', 6, "must be postgresql://"),
        ('engine = "postgres"', 4, 'needs dsn = "postgresql://'),
        ('engine = "postgres"\ndsn = "postgresql://etl@db/lake"\npath = "w.duckdb"', 4, "path"),
        ('dsn = "postgresql://etl@db/lake"', 4, 'dsn is for engine = "postgres"'),
        ('schema = "analytics"', 4, 'schema is for engine = "postgres"'),
        ('engine = "postgres"\ndsn = "postgresql://e@db/l"\nschema = "_tidegate"', 7, "reserved"),
        ('engine = "postgres"\ndsn = "postgresql://e@db/l"\nschema = "a-b"', 7, "schema"),
        ('engine = "postgres"\ndsn = "postgresql://e@db/l"\npassword_env = "A B"', 7, "password"),
    ],
)
def test_a_bad_warehouse_is_one_line_without_the_secret(
    tmp_path: Path, warehouse: str, line: int, message: str
) -> None:
    project = project_with(tmp_path, warehouse)
    result = tidegate("status", "--project", project)
    assert result.exit_code == 2
    [error] = result.stderr.splitlines()
    assert error.startswith(f"error: {project / 'tidegate.toml'}:{line}: "), error
    assert message in error
    assert SECRET not in result.stdout + result.stderr


def test_a_postgres_project_reads_its_ledger_without_psycopg(tmp_path: Path) -> None:
    """status, show and history read the ledger: on a PostgreSQL warehouse too, they import
    neither the driver nor the engine — once the ledger is in use (built): before that, every
    command looks for the commit markers of a lost ledger in the warehouse
    (ops/ledger_guard.py)."""
    project = project_with(tmp_path, 'engine = "postgres"\ndsn = "postgresql://e@127.0.0.1:1/x"')
    (project / "models" / "m.sql").write_text(KEY_MODEL)
    assert tidegate("build", "--project", project).exit_code == 0  # the server is unreachable
    probe = (
        "import sys\nfrom tidegate.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as done:\n    assert not done.code\n"
        "print([m for m in ('psycopg', 'duckdb') if m in sys.modules])\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe, "status", "--project", str(project)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert found.stdout.strip().splitlines()[-1] == "[]"


def test_without_psycopg_the_engine_is_a_one_line_hint(tmp_path: Path) -> None:
    project = project_with(tmp_path, 'engine = "postgres"\ndsn = "postgresql://e@127.0.0.1:1/x"')
    (project / "models" / "m.sql").write_text(KEY_MODEL)
    probe = (
        "import sys\nsys.modules['psycopg'] = None\nfrom tidegate.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    assert tidegate("build", "--project", project).exit_code == 0
    found = subprocess.run(
        [sys.executable, "-c", probe, "deploy", "m", "--project", str(project)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert found.returncode == 2, found.stderr
    assert (
        found.stderr.strip()
        == "error: the postgres engine needs psycopg: pip install 'tidegate[postgres]'"
    )
