from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import example_project, remove_templates


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The orders example at 20 rows/day, built and every model deployed."""
    return example_project(tmp_path / "proj")


@pytest.fixture
def undeployed_project(tmp_path: Path) -> Path:
    return example_project(tmp_path / "proj", deploy=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    remove_templates()
