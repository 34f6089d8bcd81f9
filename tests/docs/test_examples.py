"""Docs that run: every shell example of the docs is executed against a fresh
project, so that a renamed flag or a changed exit code breaks the build, not the reader (the
conventions are in tests/docs/examples.py and docs/contributing.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dbt.kit import (
    copy_fixture,
    dbt_executable_for_tests,
    duckdb_env,
    load_raw_duckdb,
)
from tests.docs.examples import SETUPS, Page, pages, script
from tidegate.execution.dbt import VENV_VARIABLE

BIN = Path(sys.executable).parent
PAGES = pages()

pytestmark = pytest.mark.docs


def environment(home: Path) -> dict[str, str]:
    return {
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "COLUMNS": "120",
        # a checkout's source tree when the test runs it through PYTHONPATH
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "TIDEGATE_TEST_POSTGRES": os.environ.get(
            "TIDEGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    }


def prepared(page: Page, root: Path, env: dict[str, str]) -> Path:
    project = root / "project"
    if page.setup == "empty":
        project.mkdir()
        return project
    if page.setup == "dbt":
        return dbt_shop(project, env)
    command = (
        ["tidegate", "init", "--example", "orders", "--rows-per-day", "50", str(project)]
        if page.setup == "orders"
        else ["tidegate", "demo", "--rows-per-day", "50", "--keep", str(project)]
    )
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return project


def dbt_shop(project: Path, env: dict[str, str]) -> Path:
    """A folder holding the jaffle fixture as `analytics/` and the DuckDB file its profile's
    `duckdb` target builds into, with five days of raw rows; the profile's variables and the
    test suite's dbt (tests/dbt/kit.py: installed once, shared) in the examples' environment."""
    project.mkdir()
    copy_fixture(project / "analytics")
    warehouse = project / "warehouse.duckdb"
    load_raw_duckdb(warehouse, days=5)
    dbt = dbt_executable_for_tests()
    env.update(duckdb_env(warehouse))
    env[VENV_VARIABLE] = str(dbt.parent.parent)  # the suite's shared venv, by default
    # plain dbt on the PATH, as where a dbt project is developed
    env["PATH"] = f"{env['PATH']}{os.pathsep}{dbt.parent}"
    return project


def test_every_page_names_a_known_setup() -> None:
    assert PAGES, "no page holds an example"
    unknown = [page.name for page in PAGES if page.setup not in SETUPS]
    assert not unknown, f"unknown <!-- examples: … --> setup in {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_the_examples_of_the_page_run(page: Page, tmp_path: Path) -> None:
    env = environment(tmp_path)
    here = prepared(page, tmp_path, env)
    cwd_file = tmp_path / "cwd"
    env["DOCS_EXAMPLE_CWD"] = str(cwd_file)
    for block in page.blocks:
        done = subprocess.run(
            ["bash", "-c", script(block)],
            cwd=here,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        where = f"{page.name}:{block.line}"
        assert done.returncode == 0, (
            f"{where}\n{block.text}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        assert "Traceback" not in done.stderr, f"{where}: {done.stderr[-3000:]}"
        here = Path(cwd_file.read_text().strip())
