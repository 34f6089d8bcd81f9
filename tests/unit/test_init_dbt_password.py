"""`tidegate init --dbt` on a PostgreSQL target whose password is an `env_var()`: the
tidegate.toml it writes opens the warehouse as dbt would, with or without the variable set."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidegate.engines.postgres_connection import warehouse_of
from tidegate.ops.init_dbt import dbt_project_file
from tidegate.project.config import read_project_file

PROFILE = """\
shop:
  target: pg
  outputs:
    pg:
      type: postgres
      host: 127.0.0.1
      port: 5432
      user: postgres
      password: "{password}"
      dbname: test
      schema: analytics
"""


def written(tmp_path: Path, password: str) -> str:
    """The tidegate.toml text init writes for a dbt project whose profile has `password`."""
    dbt = tmp_path / "dbt"
    dbt.mkdir()
    (dbt / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
    (dbt / "profiles.yml").write_text(PROFILE.format(password=password))
    text = dbt_project_file(tmp_path, dbt, None)
    (tmp_path / "tidegate.toml").write_text(text)
    return text


def opened_password(tmp_path: Path) -> str | None:
    """The password tidegate opens the warehouse with, per the written tidegate.toml."""
    settings = read_project_file(tmp_path).warehouse
    assert settings.engine == "postgres" and settings.dsn is not None
    return warehouse_of(settings.dsn, settings.db_schema, settings.password_env).password


@pytest.fixture(autouse=True)
def no_dbt_profiles_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DBT_PROFILES_DIR", raising=False)
    monkeypatch.delenv("SHOP_PG_PASSWORD", raising=False)


def test_a_password_variable_with_an_empty_default_may_be_unset(tmp_path: Path) -> None:
    # dbt connects without a password when the variable is unset; so must tidegate
    text = written(tmp_path, "{{ env_var('SHOP_PG_PASSWORD', '') }}")
    assert "\npassword_env" not in text, text
    assert '# password_env = "SHOP_PG_PASSWORD"' in text, text
    assert opened_password(tmp_path) is None


def test_a_password_variable_set_when_init_runs_is_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_PG_PASSWORD", "s3cret")
    text = written(tmp_path, "{{ env_var('SHOP_PG_PASSWORD', '') }}")
    assert '\npassword_env = "SHOP_PG_PASSWORD"' in text, text
    assert "s3cret" not in text
    assert opened_password(tmp_path) == "s3cret"


@pytest.mark.parametrize(
    "password", ["{{ env_var('SHOP_PG_PASSWORD') }}", "{{ env_var('SHOP_PG_PASSWORD', 'x') }}"]
)
def test_a_password_variable_dbt_needs_or_defaults_to_a_password_is_named(
    tmp_path: Path, password: str
) -> None:
    # dbt fails without it, or falls back on a password tidegate.toml must never hold: tidegate
    # names the variable (and says so when it is unset)
    text = written(tmp_path, password)
    assert '\npassword_env = "SHOP_PG_PASSWORD"' in text, text
