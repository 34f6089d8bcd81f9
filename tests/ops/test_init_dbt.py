"""`tidegate init --dbt PATH`: tidegate.toml for an existing dbt project, its warehouse read from
the profile's target; a project it cannot read is one line and exit 2, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import tidegate
from tidegate.project.config import read_project_file

PROFILES = """\
shop:
  target: dev
  outputs:
    dev:
      type: duckdb
      path: "{{ env_var('SHOP_DUCKDB', 'shop.duckdb') }}"
    prod:
      type: postgres
      host: db.internal
      port: 6432
      user: analyst
      password: "{{ env_var('SHOP_PASSWORD') }}"
      dbname: analytics
      schema: marts
    memory:
      type: duckdb
      path: ":memory:"
    bigquery:
      type: bigquery
"""


@pytest.fixture
def dbt_project(tmp_path: Path) -> Path:
    folder = tmp_path / "analytics"
    folder.mkdir()
    (folder / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
    (folder / "profiles.yml").write_text(PROFILES)
    return folder


def test_the_default_target_gives_the_duckdb_file_the_profile_names(
    tmp_path: Path, dbt_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SHOP_DUCKDB", raising=False)
    root = tmp_path / "tidegate"
    done = tidegate("init", str(root), "--dbt", str(dbt_project))
    assert done.exit_code == 0, done.stderr
    settings = read_project_file(root)
    assert settings.dbt is not None
    assert (settings.dbt.project, settings.dbt.profiles_dir, settings.dbt.target) == (
        "../analytics",
        "../analytics",
        "dev",
    )
    # a relative DuckDB path is where dbt opens it: from the dbt project's folder
    assert (root / settings.warehouse.path).resolve() == dbt_project / "shop.duckdb"
    # the dbt project is only read
    assert sorted(p.name for p in dbt_project.iterdir()) == ["dbt_project.yml", "profiles.yml"]


def test_a_postgres_target_names_its_password_variable_never_the_password(
    tmp_path: Path, dbt_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_PASSWORD", "s3cret-value")
    root = tmp_path / "tidegate"
    done = tidegate("init", str(root), "--dbt", str(dbt_project), "--dbt-target", "prod")
    assert done.exit_code == 0, done.stderr
    text = (root / "tidegate.toml").read_text()
    assert "s3cret-value" not in text
    warehouse = read_project_file(root).warehouse
    assert warehouse.engine == "postgres"
    assert warehouse.dsn == "postgresql://analyst@db.internal:6432/analytics"
    assert (warehouse.db_schema, warehouse.password_env) == ("marts", "SHOP_PASSWORD")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--dbt-target", "nope"), "has no target 'nope' (targets: bigquery, dev, memory, prod)"),
        (("--dbt-target", "memory"), "keeps no DuckDB file"),
        (("--dbt-target", "bigquery"), "is bigquery; tidegate controls dbt projects on duckdb"),
        (("--example", "orders"), "--dbt and --example scaffold different projects"),
    ],
)
def test_what_init_cannot_use_is_one_line_and_writes_nothing(
    tmp_path: Path, dbt_project: Path, args: tuple[str, ...], message: str
) -> None:
    root = tmp_path / "tidegate"
    done = tidegate("init", str(root), "--dbt", str(dbt_project), *args)
    assert done.exit_code == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line, line
    assert not (root / "tidegate.toml").exists()


def test_a_folder_without_dbt_project_yml_is_refused(tmp_path: Path) -> None:
    done = tidegate("init", str(tmp_path / "t"), "--dbt", str(tmp_path))
    assert done.exit_code == 2
    assert "is not a dbt project folder (no dbt_project.yml)" in done.stderr
