"""Tools run in virtual environments of their own (tidegate's dbt; the tests' Airflow and
Dagster): installed on first use, one installer at a time across processes (a file lock beside
the environment), and installed again when the requirements asked for change (a stamp in the
environment records what was installed). An environment the user named, made elsewhere (no
stamp), that holds the tool already is used as it is, never installed into."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tidegate.domain.errors import ModelError

STAMP = "tidegate-requirements.json"
INSTALL_TIMEOUT_SECONDS = 1800


def tool_executable(
    venv: Path,
    requirements: Sequence[str],
    executable: str,
    timeout: float = INSTALL_TIMEOUT_SECONDS,
    named: bool = False,
) -> Path:
    """`venv/bin/EXECUTABLE`, with `requirements` installed first unless they are; `named`: the
    user named the environment (it is used as it is if it was made elsewhere and holds it)."""
    found = venv / "bin" / executable
    wanted = json.dumps(list(requirements))
    if _ready(venv, found, wanted, named):
        return found
    venv.parent.mkdir(parents=True, exist_ok=True)
    with (venv.parent / f"{venv.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _ready(venv, found, wanted, named):
            _install(venv, requirements, executable, timeout)
            (venv / STAMP).write_text(wanted)
    return found


def _ready(venv: Path, found: Path, wanted: str, named: bool) -> bool:
    stamp = venv / STAMP
    if not stamp.exists():
        return named and found.exists()
    return stamp.read_text() == wanted


def _install(venv: Path, requirements: Sequence[str], tool: str, timeout: float) -> None:
    python = venv / "bin" / "python"
    steps = (
        [sys.executable, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", *requirements],
    )
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.SubprocessError) as error:
            raise ModelError(f"installing {tool} into {venv} failed: {error}") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ModelError(f"installing {tool} into {venv} failed: {last}")
