"""[warehouse] engine = "spark": a master or a Spark Connect server, the Iceberg tables' folder,
and a catalog (a SQLite file in the folder, or a PostgreSQL database named without its password).
Every bad combination is one line; a project without pyspark gets a one-line hint; a warehouse
left in Spark's retired format of Parquet folders and pointers is refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit import tidegate
from tidegate.engines.iceberg_place import iceberg_place
from tidegate.engines.spark_layout import Layout
from tidegate.engines.spark_settings import spark_warehouse
from tidegate.project.config import read_project_file

SECRET = "hunter2-in-the-file"


def project_with(tmp_path: Path, warehouse: str) -> Path:
    (tmp_path / "tidegate.toml").write_text(f'[project]\nname = "x"\n\n[warehouse]\n{warehouse}\n')
    (tmp_path / "models").mkdir()
    return tmp_path


def test_a_spark_warehouse_by_default_is_local_with_its_catalog_in_the_folder(
    tmp_path: Path,
) -> None:
    project = project_with(tmp_path, 'engine = "spark"\nconf = { "spark.executor.cores" = 2 }')
    settings = read_project_file(project).warehouse
    assert settings.tables == "iceberg"
    session, layout, fences = spark_warehouse(project, settings)
    assert (session.master, session.remote) == ("local[2]", None)
    assert layout == Layout(str(project.resolve() / "lake"))
    assert session.conf == {
        "spark.sql.warehouse.dir": layout.path("_tidegate/spark-sql"),
        "spark.executor.cores": "2",
    }
    assert fences.sqlite == project.resolve() / "lake" / "_tidegate" / "fences.sqlite"
    assert (
        iceberg_place(project, settings).catalog_file == project.resolve() / "lake" / "catalog.db"
    )


def test_a_spark_connect_warehouse_with_a_shared_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKE_CATALOG_PASSWORD", SECRET)
    project = project_with(
        tmp_path,
        'engine = "spark"\nremote = "sc://spark.internal:15002"\nlocation = "/mnt/lake"\n'
        'catalog = "postgresql://etl@db.internal/lake"\npassword_env = "LAKE_CATALOG_PASSWORD"',
    )
    session, layout, fences = spark_warehouse(project, read_project_file(project).warehouse)
    assert (session.master, session.remote) == (None, "sc://spark.internal:15002")
    assert layout.root == "/mnt/lake"
    # the fences live in the catalog's database
    assert (fences.dsn, fences.password) == ("postgresql://etl@db.internal/lake", SECRET)
    assert SECRET not in repr(fences)


@pytest.mark.parametrize("location", ["", 'location = "old"\n'])
def test_a_warehouse_in_the_retired_format_is_refused_in_one_line(
    tmp_path: Path, location: str
) -> None:
    """The former default location (`warehouse/`), or the given one, holding the pointer
    catalog of Spark's retired format: one line saying how to move to Iceberg tables."""
    project = project_with(tmp_path, f'engine = "spark"\n{location}')
    folder = project / ("old" if location else "warehouse") / "_tidegate"
    folder.mkdir(parents=True)
    (folder / "catalog.sqlite").write_bytes(b"")
    (project / "models" / "m.sql").write_text(
        '/* tidegate\ngrain = "key"\nkey_column = "k"\nkeys = ["a"]\n\n[columns]\n'
        'k = "VARCHAR NOT NULL"\n*/\nSELECT CAST($key AS VARCHAR) AS k\n'
    )
    assert tidegate("build", "--project", project).exit_code == 0
    result = tidegate("deploy", "m", "--project", project)
    assert result.exit_code == 2
    [error] = result.stderr.splitlines()
    assert "pointers of Spark's former tables" in error
    assert "backfill the models into it" in error
    assert not (project / "lake").exists()


@pytest.mark.parametrize(
    ("warehouse", "message"),
    [
        ('engine = "spark"\nmaster = "local[2]"\nremote = "sc://h:15002"', "master or remote"),
        ('engine = "spark"\nremote = "http://h:15002"', "sc://HOST:PORT"),
        (f'engine = "spark"\ncatalog = "postgresql://etl:{SECRET}@db/lake"', "password"),
        ('engine = "spark"\ncatalog = "mysql://etl@db/lake"', "must be postgresql://"),
        ('engine = "spark"\npassword_env = "P"', "password_env is for a catalog in PostgreSQL"),
        ('engine = "spark"\nlocation = "s3a://lake/wh"', "location must be a folder"),
        ('engine = "spark"\ntables = "engine"', 'publishes Iceberg tables: tables = "iceberg"'),
        ('engine = "spark"\npath = "w.duckdb"', 'path is not a key of engine = "spark"'),
        ('engine = "spark"\ndsn = "postgresql://e@db/l"', 'dsn is not a key of engine = "spark"'),
        ('master = "local[2]"', 'master is for engine = "spark"'),
        ('engine = "postgres"\ndsn = "postgresql://e@db/l"\nlocation = "x"', "location"),
    ],
)
def test_a_bad_spark_warehouse_is_one_line_without_the_secret(
    tmp_path: Path, warehouse: str, message: str
) -> None:
    project = project_with(tmp_path, warehouse)
    result = tidegate("status", "--project", project)
    assert result.exit_code == 2
    [error] = result.stderr.splitlines()
    assert error.startswith(f"error: {project / 'tidegate.toml'}:"), error
    assert message in error
    assert SECRET not in result.stdout + result.stderr


def run_without(module: str, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run tidegate in a process where `module` cannot be imported."""
    probe = (
        f"import sys\nsys.modules[{module!r}] = None\nfrom tidegate.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    return subprocess.run(
        [sys.executable, "-c", probe, *args, "--project", str(project)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_pyspark_the_engine_is_a_one_line_hint(tmp_path: Path) -> None:
    project = project_with(tmp_path, 'engine = "spark"')
    (project / "models" / "m.sql").write_text(
        '/* tidegate\ngrain = "key"\nkey_column = "k"\nkeys = ["a"]\n\n[columns]\n'
        'k = "VARCHAR NOT NULL"\n*/\nSELECT CAST($key AS VARCHAR) AS k\n'
    )
    assert tidegate("build", "--project", project).exit_code == 0
    found = run_without("pyspark", project, "deploy", "m")
    assert found.returncode == 2, found.stderr
    assert found.stderr.strip() == (
        "error: the spark engine needs pyspark: pip install 'tidegate[spark]'"
    )


def test_a_spark_project_reads_its_ledger_without_pyspark(tmp_path: Path) -> None:
    project = project_with(tmp_path, 'engine = "spark"')
    assert run_without("pyspark", project, "status").returncode == 0
