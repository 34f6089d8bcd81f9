"""Airflow and Dagster are optional extras: the core, its command line and the orchestration core
import neither (checked in a fresh interpreter, where nothing has imported them yet). Whether
they are installed or not, every attempt to import them is recorded: a guarded `try: import
airflow` counts too."""

from __future__ import annotations

import subprocess
import sys

from tests.kit import REPO

CHECK = (
    "import sys\n"
    "tried = []\n"
    "class Tracer:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('airflow', 'dagster'): tried.append(name)\n"
    "        return None\n"
    "sys.meta_path.insert(0, Tracer())\n"
    "import tidegate, tidegate.cli, tidegate.orchestration, tidegate.api; "
    "import tidegate.airflow, tidegate.airflow.naming, tidegate.airflow.outcomes, "
    "tidegate.airflow.keys; "
    "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'dagster')); "
    "assert not loaded and not tried, (loaded, tried); print('clean')"
)


def test_the_core_imports_no_orchestrator() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "clean", done.stderr
