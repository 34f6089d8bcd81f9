"""What decides whether dbt compiles again, and how its error is told, without running dbt."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidegate.dbt.compiler import cache_key, first_error
from tidegate.project.config import DbtSection


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    project = tmp_path / "analytics"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
    (project / "models" / "orders.sql").write_text("select 1 as id\n")
    (project / "profiles.yml").write_text(
        "shop:\n  outputs:\n    dev:\n      type: duckdb\n"
        "      path: \"{{ env_var('SHOP_DB') }}\"\n"
    )
    return project


def test_the_key_follows_the_code_the_target_and_the_variables_dbt_reads(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    section = DbtSection(project="analytics")
    monkeypatch.setenv("SHOP_DB", "first.duckdb")
    first = cache_key(folder, folder, section)
    assert cache_key(folder, folder, section) == first
    monkeypatch.setenv("SHOP_DB", "second.duckdb")
    second = cache_key(folder, folder, section)
    assert second != first and "second.duckdb" not in second
    assert cache_key(folder, folder, DbtSection(project="analytics", target="prod")) != second
    (folder / "models" / "orders.sql").write_text("select 2 as id\n")
    assert cache_key(folder, folder, section) != second


def test_dbt_error_is_one_line_from_the_line_naming_it(tmp_path: Path) -> None:
    output = (
        "15:00:01  Running with dbt=1.11.16\n"
        "15:00:02  Encountered an error:\n"
        "Compilation Error in model orders (models/orders.sql)\n"
        "  depends on a node named 'stg_order' which was not found\n"
        "15:00:02  Done.\n"
    )
    assert first_error(output) == (
        "Encountered an error: Compilation Error in model orders (models/orders.sql) "
        "depends on a node named 'stg_order' which was not found"
    )
    assert first_error("") == "no output"
