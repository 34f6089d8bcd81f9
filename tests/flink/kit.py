"""Flink for the tests: PyFlink installed on first use into a virtual environment the whole
suite shares (one installer at a time, across processes, under a file lock), with tidegate's
core dependencies; tidegate runs there as `python -m tidegate` from this checkout's `src`, as a
user of `tidegate[flink]` runs it. The supervisor, validate and deploy are real processes, the
jobs real Flink jobs on local MiniClusters.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.faults.ledger import wait_until
from tests.kit import REPO
from tests.ops.test_json_schemas import schema_name, validator
from tidegate.execution.tool_venv import tool_executable

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

FLINK_REQUIREMENT = "apache-flink==2.3.*"
SHARED_VENV = Path(os.environ.get("TMPDIR", "/tmp")) / "tidegate-test-flink-venv"
INSTALL_TIMEOUT_SECONDS = 900
MODEL = "orders_per_day"
EXAMPLE = REPO / "src" / "tidegate" / "examples" / "flink"
COMMAND_TIMEOUT_SECONDS = 240


def requirements() -> list[str]:
    """PyFlink and tidegate's core dependencies."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [FLINK_REQUIREMENT, *project["dependencies"]]


def flink_python(venv: Path = SHARED_VENV) -> Path:
    """The interpreter of the Flink environment, installed on first use. Raises if it cannot
    be installed: the tests then fail."""
    return tool_executable(venv, requirements(), "python", INSTALL_TIMEOUT_SECONDS)


def environment() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "PYTHONPATH": str(REPO / "src"),
        **({"JAVA_HOME": os.environ["JAVA_HOME"]} if "JAVA_HOME" in os.environ else {}),
    }


def tidegate(project: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """`tidegate ARGS --project PROJECT` in the Flink environment (`init`: in PROJECT)."""
    where = () if args[0] == "init" else ("--project", str(project))
    done = subprocess.run(
        [str(flink_python()), "-m", "tidegate", *args, *where],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=COMMAND_TIMEOUT_SECONDS,
        check=False,
    )
    if ok:
        assert done.returncode == 0, f"tidegate {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


def document(project: Path, *args: str) -> dict[str, Any]:
    """`tidegate ARGS --json`: its one document, valid against the schema it names."""
    done = tidegate(project, *args, "--json")
    found: dict[str, Any] = json.loads(done.stdout)
    validator(schema_name(found)).validate(found)
    return found


def example(folder: Path) -> Path:
    """The Flink example, scaffolded by `tidegate init --example flink`."""
    project = folder / "stream"
    tidegate(folder, "init", str(project), "--example", "flink")
    return project


# the example's job changed in a few places: (what it holds, what the variant holds instead)
VARIANTS = {
    # the keyed operator's uid renamed: its state in a savepoint maps to no operator
    "renamed_uid": (('.uid("day-totals")', '.uid("day-totals-by-day")'),),
    # the same uid, a state of another type (text, not two integers): fails as it is read
    "state_type": (
        ("Types.TUPLE([Types.LONG(), Types.LONG()]))", "Types.STRING())"),
        ("self.totals.value() or (0, 0)", 'map(int, (self.totals.value() or "0|0").split("|"))'),
        ("self.totals.update((total, count))", 'self.totals.update(f"{total}|{count}")'),
    ),
    # the same uid, the state's integers read as floats: nothing fails, the totals go wrong
    "float_state": (("[Types.LONG(), Types.LONG()]", "[Types.DOUBLE(), Types.DOUBLE()]"),),
    # parsing fails on every order: a version that cannot run
    "crash": (("return order_id, day, int(amount)", 'raise ValueError(f"cannot parse {line!r}")'),),
}


def use_job(project: Path, job: str) -> None:
    """Replace the example's job with a variant of it (VARIANTS), or with the example's v2."""
    if job == "v2":
        text = (EXAMPLE / "story" / "orders_per_day_v2.py").read_text()
    else:
        text = (EXAMPLE / "jobs" / "orders_per_day.py").read_text()
        for found, changed in VARIANTS[job]:
            assert found in text, f"the example's job no longer holds what {job} changes"
            text = text.replace(found, changed)
    (project / "jobs" / "orders_per_day.py").write_text(text)
    if job == "v2":
        model = project / "models" / f"{MODEL}.toml"
        model.write_text(
            model.read_text().replace(
                'day_count = "BIGINT NOT NULL" }',
                'day_count = "BIGINT NOT NULL", band = "VARCHAR NOT NULL" }',
            )
        )


def write_orders(project: Path, files: int = 1) -> None:
    subprocess.run(
        [sys.executable, str(project / "write_orders.py"), str(files)],
        check=True,
        capture_output=True,
    )


def orders_in(project: Path) -> list[list[str]]:
    return [
        line.split(",")
        for file in sorted((project / "in" / "orders").glob("orders-*.csv"))
        for line in file.read_text().split()
    ]


def orders_out(project: Path) -> list[list[str]]:
    """The rows the job's sink committed (hidden files are in progress)."""
    output = project / "out" / MODEL
    return [
        line.split(",")
        for file in sorted(output.rglob("*"))
        if file.is_file() and not any(p.startswith(".") for p in file.relative_to(output).parts)
        for line in file.read_text().split()
    ]


def totals(rows: list[list[str]]) -> tuple[int, int, int]:
    """(rows, distinct order ids, sum of amounts)."""
    return len(rows), len({r[0] for r in rows}), sum(int(r[2]) for r in rows)


def caught_up(project: Path) -> bool:
    """Whether the output holds every order written, each once."""
    return totals(orders_out(project)) == totals(orders_in(project))


def wait_caught_up(project: Path, timeout: float = 60.0) -> None:
    wait_until("the output to hold every order", lambda: caught_up(project) or None, timeout)
    assert totals(orders_out(project)) == totals(orders_in(project))


class Supervisor:
    """`tidegate stream start MODEL` as a process of its own (a session of its own, so that a
    test can kill it alone)."""

    def __init__(self, project: Path, env: dict[str, str] | None = None) -> None:
        self.project = project
        self.log = project / "supervisor.log"
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                [str(flink_python()), "-m", "tidegate", "stream", "start", MODEL],
                cwd=project,
                env={**environment(), **(env or {})},
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_until(
            "the supervisor",
            lambda: self.supervising() or self.process.poll() is not None or None,
            60,
        )
        assert self.process.poll() is None, self.log.read_text()

    def supervising(self) -> bool:
        from tidegate.ops.context import Context
        from tidegate.ops.stream_lock import supervised

        return supervised(Context(self.project), MODEL)

    def descendants(self) -> list[int]:
        """The processes the supervisor started (its JVM, the JVM's Python workers), by pid."""
        parents: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(stat.parent.name)] = int(fields[1])
        found, frontier = [], [self.process.pid]
        while frontier:
            children = [pid for pid, parent in parents.items() if parent in frontier]
            found += children
            frontier = children
        return found

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=120)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def validate_with_input(project: Path) -> subprocess.CompletedProcess[str]:
    """`tidegate validate MODEL --json` while orders arrive: an order file is written once the
    validation has its restore point (a new savepoint), so the shadow job reads it."""
    # every order committed first: a savepoint taken while the sink has a file in progress
    # carries that file's bucket, and a job restored from it writes the bucket where it was
    # (docs/models/flink.md, "What is not there yet")
    wait_caught_up(project)
    savepoints = project / "state" / MODEL / "savepoints"
    before = set(savepoints.glob("savepoint-*")) if savepoints.is_dir() else set()
    validating = subprocess.Popen(
        [str(flink_python()), "-m", "tidegate", "validate", MODEL, "--json"],
        cwd=project,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(
        "the validation's savepoint",
        lambda: (
            ({m.parent for m in savepoints.glob("savepoint-*/_metadata")} - before)
            or validating.poll() is not None
            or None
        ),
        timeout=120,
    )
    write_orders(project, 1)
    out, err = validating.communicate(timeout=COMMAND_TIMEOUT_SECONDS)
    return subprocess.CompletedProcess(validating.args, validating.returncode, out, err)


def running_example(folder: Path) -> tuple[Path, Supervisor]:
    """The example built, two order files written, supervised, v1 deployed and caught up."""
    project = example(folder)
    tidegate(project, "build")
    write_orders(project, 2)
    supervisor = Supervisor(project)
    try:
        document(project, "deploy", MODEL)
        wait_caught_up(project)
    except BaseException:
        supervisor.stop()
        raise
    return project, supervisor
