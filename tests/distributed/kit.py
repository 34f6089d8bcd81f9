"""Distributed backfills on a shared PostgreSQL ledger and warehouse: the orders example with both
in one fresh database, and real `tidegate` coordinator and worker processes (their output in
files, so a chatty worker never blocks on a full pipe)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

from tests.engines.postgres_kit import postgres_project, rows
from tests.kit import EXAMPLE_MODELS, tidegate

SQLITE_STATE = '[state]\npath = ".tidegate/state.db"\n'


def shared_project(target: Path, dsn: str, rows_per_day: int) -> Path:
    """The orders example with its warehouse and its ledger (schema `ledger`) in `dsn`, built
    and every model deployed."""
    postgres_project(target, dsn, rows_per_day=rows_per_day, deploy=False)
    config = target / "tidegate.toml"
    text = config.read_text()
    assert text.count(SQLITE_STATE) == 1
    config.write_text(text.replace(SQLITE_STATE, f'[state]\nurl = "{dsn}"\nschema = "ledger"\n'))
    assert tidegate("build", "--project", target).exit_code == 0
    for model in EXAMPLE_MODELS:
        deployed = tidegate("deploy", model, "--project", target)
        assert deployed.exit_code == 0, deployed.stderr
    return target


class Process:
    """A real `tidegate …` process whose stdout and stderr go to files. Every one started is
    killed after its test (conftest), should the test fail before it ends."""

    started: ClassVar[list[Process]] = []

    def __init__(
        self, logs: Path, name: str, *args: str | Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.out, self.err = logs / f"{name}.out", logs / f"{name}.err"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "tidegate", *[str(a) for a in args]],
                stdout=out,
                stderr=err,
                env={**os.environ, **(env or {})},
            )
        Process.started.append(self)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @classmethod
    def kill_all(cls) -> None:
        for process in cls.started:
            if process.popen.poll() is None:
                process.popen.kill()
                process.popen.wait()
        cls.started.clear()

    def wait(self, timeout: float = 120) -> int:
        return self.popen.wait(timeout=timeout)

    def stdout(self) -> str:
        return self.out.read_text()

    def stderr(self) -> str:
        return self.err.read_text()

    def stopped(self) -> bool:
        """Whether the process is stopped by a signal (state T in /proc)."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "T"


def worker(logs: Path, name: str, project: Path, *options: str, **env: str) -> Process:
    return Process(
        logs,
        name,
        "worker",
        "--name",
        name,
        "--poll-seconds",
        "0.1",
        "--exit-when-idle",
        *options,
        "--project",
        project,
        env=env,
    )


def run_row(dsn: str, run_id: str | None = None) -> Any:
    """The newest distributed run (or `run_id`): id, status, reason."""
    found = rows(
        dsn,
        "SELECT run_id, status, reason FROM ledger.runs WHERE distributed = 1 "
        "AND (%(run)s::text IS NULL OR run_id = %(run)s) ORDER BY run_id DESC LIMIT 1",
        {"run": run_id},
    )
    return found[0] if found else None


def published_count(dsn: str, run_id: str) -> int:
    return int(
        rows(
            dsn,
            "SELECT count(*) FROM ledger.attempts WHERE run_id = %s AND state = 'published'",
            (run_id,),
        )[0][0]
    )


def markers_per_partition(dsn: str, run_id: str) -> dict[int, int]:
    """How many commit markers each partition got from the run (a publish each)."""
    found = rows(
        dsn,
        "SELECT partition_start, count(*) FROM _tidegate.commit_markers WHERE run_id = %s "
        "GROUP BY 1",
        (run_id,),
    )
    return {int(start): int(count) for start, count in found}
