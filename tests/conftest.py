from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import Hook, example_project, remove_templates


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The orders example at 20 rows/day, built and every model deployed."""
    return example_project(tmp_path / "proj")


@pytest.fixture
def undeployed_project(tmp_path: Path) -> Path:
    return example_project(tmp_path / "proj", deploy=False)


@pytest.fixture
def hook() -> Iterator[Hook]:
    """A consumer's HTTP endpoint on 127.0.0.1, down until `hook.up` is set."""
    found = Hook()
    yield found
    found.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    remove_templates()
