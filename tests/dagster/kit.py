"""Dagster for the tests: installed on first use into a virtual environment the whole suite
shares (one installer at a time, across processes, under a file lock), and run there for real.

The environment holds Dagster and tidegate's core dependencies (read from pyproject.toml), not
tidegate itself: scripts run with this checkout's `src` on PYTHONPATH, so one environment serves
every checkout on the machine and always runs the code under test. tidegate is started as
`python -m tidegate` of that environment (no `tidegate` on the scripts' PATH), the one
environment a user of `tidegate[dagster]` has.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.kit import REPO
from tidegate.execution.tool_venv import tool_executable

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

DAGSTER_REQUIREMENT = "dagster==1.13.*"
SHARED_VENV = Path(os.environ.get("TMPDIR", "/tmp")) / "tidegate-test-dagster-venv"
INSTALL_TIMEOUT_SECONDS = 900
SCRIPT = Path(__file__).parent / "materialize.py"
DEFINITIONS = REPO / "examples" / "dagster" / "definitions.py"
# an order of 3 January 2025 with a status daily_revenue's accepted_values check refuses
BAD_STATUS = """
    UPDATE orders SET status = 'lost'
    WHERE order_id = (SELECT min(order_id) FROM orders
                      WHERE order_ts >= '2025-01-03' AND order_ts < '2025-01-04')
"""


def requirements() -> list[str]:
    """Dagster and tidegate's core dependencies."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [DAGSTER_REQUIREMENT, *project["dependencies"]]


def dagster_python(venv: Path = SHARED_VENV) -> Path:
    """The interpreter of the Dagster environment, installed (or brought up to the current
    requirements) on first use. Raises if it cannot be installed: the tests then fail."""
    dagster = tool_executable(venv, requirements(), "dagster", INSTALL_TIMEOUT_SECONDS)
    return dagster.parent / "python"


def environment(project: Path) -> dict[str, str]:
    """The scripts' environment: this checkout's code, the project of the example definitions,
    and a PATH without any `tidegate` script (so tidegate runs from this checkout)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}",
        "TIDEGATE_PROJECT": str(project),
        "DAGSTER_TELEMETRY_ENABLED": "false",
    }


def dagster(project: Path, *args: str, definitions: Path = DEFINITIONS) -> dict[str, Any]:
    """`materialize.py DEFINITIONS ARGS` in the Dagster environment (by default the example
    definitions file, on `project`): its JSON report."""
    done = subprocess.run(
        [str(dagster_python()), str(SCRIPT), str(definitions), *args],
        capture_output=True,
        text=True,
        env=environment(project),
        cwd=project,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"materialize.py {args} exited {done.returncode}:\n{done.stderr}"
    report: dict[str, Any] = json.loads(done.stdout)
    return report
