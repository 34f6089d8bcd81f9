from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos import summary as chaos
from tests.kit import Hook, example_project, remove_templates

# the hostile-input tests' projects (tests/ops and tests/security share them)
pytest_plugins = ["tests.hostile_kit"]


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


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or the only process)
        chaos.start_session()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    remove_templates()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if hasattr(terminalreporter.config, "workerinput"):
        return
    done = chaos.finish_session()
    if done:
        terminalreporter.write_line(
            f"chaos: {done['kills']} kill points survived in {done['chains']} chains "
            f"{done['by_suite']}; by command {done['by_command']}; by point "
            f"{done['by_point']} (in {chaos.SUMMARY})"
        )
