"""The project hostile-input tests refuse things on: the orders example with a few days of
daily_revenue published and a consumer, one shared copy that every refusal must leave as it is
(with its dumps), and a fresh copy per test for what may write."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.kit import example_project, state_dump, tidegate, warehouse_dump

MODEL = "daily_revenue"
PUBLISHED = "2025-01-01..2025-01-03"

Dumps = tuple[dict[str, list[tuple[Any, ...]]], dict[str, list[tuple[Any, ...]]]]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The orders example with a few days of daily_revenue published, and a consumer."""
    project = example_project(tmp_path_factory.mktemp("hostile-input") / "proj")
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text()
        + '\n[[notify]]\nname = "hook"\nkind = "http"\nurl = "http://127.0.0.1:9/never"\n'
        + '\n[[consumers]]\nname = "finance"\nmodel = "daily_revenue"\nnotify = "hook"\n'
    )
    done = tidegate("backfill", MODEL, "--partitions", PUBLISHED, "--project", project)
    assert done.exit_code == 0, done.stderr
    return project


@pytest.fixture(scope="module")
def shared(template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy for the many refusals that must write nothing (so none may change it)."""
    project = tmp_path_factory.mktemp("shared") / "proj"
    shutil.copytree(template, project)
    return project


@pytest.fixture(scope="module")
def baseline(shared: Path) -> Dumps:
    """Both stores of `shared` as they are: every refusal on it must leave them so."""
    return state_dump(shared), warehouse_dump(shared)


@pytest.fixture
def fresh(template: Path, tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    shutil.copytree(template, project)
    return project
