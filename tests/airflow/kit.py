"""Airflow 3.3 for the tests: installed into a virtual environment the suite shares, on first use
and one installer at a time (as tests/dbt/kit.py does for dbt), then `airflow` run for real
against a home of the test's own: a SQLite metadata DB, the DAGs folder the test names, tidegate's
`src` on the PYTHONPATH (tidegate is not installed there) and the tidegate of this interpreter
as the one the operator starts."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.faults.ledger import wait_until
from tests.kit import REPO
from tidegate.execution.tool_venv import tool_executable

# TIDEGATE_TEST_AIRFLOW_VENV: another venv (one already holding Airflow 3.3, or a folder to
# install it into)
NAMED_VENV = os.environ.get("TIDEGATE_TEST_AIRFLOW_VENV")
SHARED_VENV = Path(
    NAMED_VENV or Path(os.environ.get("TMPDIR", "/tmp")) / "tidegate-test-airflow-venv"
)
# Airflow, and its OpenLineage provider: the operator names the task as the OpenLineage parent
# of tidegate's events through the provider's macros
REQUIREMENTS = ("apache-airflow==3.3.*", "apache-airflow-providers-openlineage>=2.0")
INSTALL_TIMEOUT_SECONDS = 900
EXAMPLE_DAGS = REPO / "examples" / "airflow"
TEST_DAGS = Path(__file__).parent / "dags"


def airflow_executable() -> Path:
    """`airflow` of the shared venv, installed on first use; an install that fails fails the
    test (it is not skipped)."""
    return tool_executable(
        SHARED_VENV, REQUIREMENTS, "airflow", INSTALL_TIMEOUT_SECONDS, named=bool(NAMED_VENV)
    )


@dataclass(frozen=True)
class Airflow:
    """An Airflow home (`home`, its metadata DB `home/airflow.db`) whose DAGs folder is `dags`."""

    home: Path
    dags: Path
    project: Path

    @property
    def database(self) -> Path:
        return self.home / "airflow.db"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.database}",
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
            "TIDEGATE_EXECUTABLE": f"{sys.executable} -m tidegate",
            "TIDEGATE_PROJECT": str(self.project),
        }

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """`airflow ARGS`, stdout and stderr together."""
        return subprocess.run(
            [str(airflow_executable()), *args],
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )

    @contextmanager
    def started(self, *args: str) -> Iterator[Output]:
        """`airflow ARGS` running, its output collected line by line as it comes."""
        process = subprocess.Popen(
            [str(airflow_executable()), *args],
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        output = Output(process)
        try:
            yield output
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
            output.reader.join(timeout=30)

    def query(self, sql: str, *parameters: Any) -> list[tuple[Any, ...]]:
        """Rows of the metadata DB (a constant statement, its values bound)."""
        with sqlite3.connect(self.database, timeout=30) as db:
            return db.execute(sql, parameters).fetchall()

    def task_states(self, dag_id: str) -> dict[str, tuple[str, int]]:
        """Each task of the DAG's (one) run: its state and try number."""
        rows = self.query(
            "SELECT task_id, state, try_number FROM task_instance WHERE dag_id = ?", dag_id
        )
        return {task: (state, tries) for task, state, tries in rows}

    def asset_partitions(self, uri: str, dag_id: str) -> dict[str, list[str]]:
        """The partition keys of the asset events on `uri` that the DAG's tasks emitted, by
        task."""
        rows = self.query(
            "SELECT e.source_task_id, e.partition_key FROM asset_event AS e "
            "JOIN asset AS a ON a.id = e.asset_id WHERE a.uri = ? AND e.source_dag_id = ? "
            "ORDER BY e.partition_key",
            uri,
            dag_id,
        )
        found: dict[str, list[str]] = {}
        for task, key in rows:
            found.setdefault(task, []).append(key)
        return found

    def xcom(self, dag_id: str, task_id: str, key: str) -> Any:
        import json

        rows = self.query(
            "SELECT value FROM xcom WHERE dag_id = ? AND task_id = ? AND key = ?",
            dag_id,
            task_id,
            key,
        )
        assert len(rows) == 1, (task_id, key, rows)
        value = rows[0][0]
        return json.loads(value) if isinstance(value, (str, bytes)) else value


class Output:
    """A running process's output, read on a thread of its own."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, what: str, condition: Callable[[], bool], timeout: float) -> None:
        def probe() -> bool | None:
            if condition():
                return True
            assert self.process.poll() is None, (
                f"airflow exited {self.process.returncode} before {what}:\n{self.text[-6000:]}"
            )
            return None

        try:
            wait_until(what, probe, timeout)
        except AssertionError as error:
            raise AssertionError(f"{error}:\n{self.text[-6000:]}") from None

    def finish(self, timeout: float) -> int:
        code = self.process.wait(timeout=timeout)
        self.reader.join(timeout=30)
        return code


def migrated(home: Path, dags: Path, project: Path) -> Airflow:
    """A fresh Airflow home with its metadata DB migrated."""
    home.mkdir(parents=True, exist_ok=True)
    airflow = Airflow(home, dags, project)
    done = airflow.run("db", "migrate")
    assert done.returncode == 0, done.stdout[-4000:]
    return airflow
