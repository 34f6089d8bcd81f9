"""Helpers for the backfill fault tests: real backfill processes whose output is read line by
line while they run, probes of the ledger they write, and model edits that make a new version.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path
from typing import IO, Any

from tests.faults.ledger import ledger_rows
from tests.kit import FORCED, Result, spawn, tidegate, warehouse_rows
from tidegate.domain.partitions import to_utc

MODEL = "daily_revenue"
# The model's only window predicate; edits hook onto it (asserted to occur exactly once).
WINDOW = "WHERE order_ts >= $start AND order_ts < $end"


def days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def day_of(partition_start: int) -> date:
    return to_utc(partition_start).date()


# --- the ledger (SQLite: readable while a writer runs) ------------------------------------------


def published_days(project: Path, run_id: str | None = None) -> list[date]:
    """Days of daily_revenue the ledger says are published (by `run_id`, when given)."""
    rows = ledger_rows(
        project,
        "SELECT partition_start FROM partitions WHERE model = ? AND attempt_id IS NOT NULL "
        "AND (? IS NULL OR run_id = ?) ORDER BY partition_start",
        (MODEL, run_id, run_id),
    )
    return [day_of(r[0]) for r in rows]


def published_count(project: Path) -> int | None:
    """For wait_until: how many partitions are published, or None while there are none."""
    return len(published_days(project)) or None


def publishing_and_staging(project: Path) -> bool | None:
    """For wait_until: True once a partition is published and another attempt is being staged
    (state running: the warehouse is computing the model's query for it right now)."""
    [(running,)] = ledger_rows(project, "SELECT count(*) FROM attempts WHERE state = 'running'")
    return True if running and published_count(project) else None


def backfill_run_ids(project: Path) -> list[str]:
    return [
        r[0]
        for r in ledger_rows(
            project, "SELECT run_id FROM runs WHERE kind = 'backfill' ORDER BY run_id"
        )
    ]


def run_row(project: Path, run_id: str) -> dict[str, Any]:
    rows = ledger_rows(
        project,
        "SELECT status, reason, started_at, ended_at, stop_requested_at, plan FROM runs "
        "WHERE run_id = ?",
        (run_id,),
    )
    assert len(rows) == 1, f"no run {run_id} in the ledger"
    status, reason, started, ended, stop_requested, plan = rows[0]
    return {
        "status": status,
        "reason": reason,
        "started_at": started,
        "ended_at": ended,
        "stop_requested_at": stop_requested,
        "plan": json.loads(plan) if plan else None,
    }


def attempt_states(project: Path, run_id: str) -> list[tuple[date, str]]:
    rows = ledger_rows(
        project,
        "SELECT partition_start, state FROM attempts WHERE run_id = ? ORDER BY partition_start",
        (run_id,),
    )
    return [(day_of(start), state) for start, state in rows]


def first_attempt_start(project: Path, run_id: str) -> str:
    [(first,)] = ledger_rows(
        project, "SELECT min(started_at) FROM attempts WHERE run_id = ?", (run_id,)
    )
    assert first is not None, f"{run_id} has no attempt"
    return str(first)


# --- the warehouse (only when no writer holds it) -----------------------------------------------


def marker_days(project: Path) -> list[date]:
    """Days of daily_revenue with at least one commit marker in the warehouse."""
    rows = warehouse_rows(
        project,
        "SELECT DISTINCT partition_start FROM _tidegate.commit_markers WHERE model = ? ORDER BY 1",
        [MODEL],
    )
    return [day_of(r[0]) for r in rows]


def markers_of(project: Path, attempt_ids: list[str]) -> list[str]:
    if not attempt_ids:
        return []
    rows = warehouse_rows(
        project,
        "SELECT attempt_id FROM _tidegate.commit_markers WHERE list_contains(?, attempt_id)",
        [attempt_ids],
    )
    return [r[0] for r in rows]


# --- the CLI --------------------------------------------------------------------------------------


def listed_backfills(project: Path) -> list[dict[str, Any]]:
    """`tidegate backfill list --json` (reads only the ledger)."""
    listed = tidegate("backfill", "list", "--project", project, "--json")
    assert listed.exit_code == 0, listed.stderr
    runs: list[dict[str, Any]] = listed.json()["runs"]
    return runs


def show_run(project: Path, run_id: str) -> dict[str, Any]:
    shown = tidegate("show", "run", run_id, "--project", project, "--json")
    assert shown.exit_code == 0, shown.stderr
    document: dict[str, Any] = shown.json()
    return document


def edit_model(project: Path, old: str, new: str) -> str:
    """Replace `old` (exactly once) in daily_revenue's SQL, build, check that the build made a
    new version, deploy it, and return its version id."""
    path = project / "models" / f"{MODEL}.sql"
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not in {path} exactly once"
    path.write_text(text.replace(old, new))
    built = tidegate("build", "--project", project, "--json")
    assert built.exit_code == 0, built.stderr
    [entry] = [m for m in built.json()["models"] if m["model"] == MODEL]
    assert entry["created"] is True and entry["version_id"] != entry["active_version"], entry
    deployed = tidegate("deploy", MODEL, *FORCED, "--project", project, "--json")
    assert deployed.exit_code == 0, deployed.stderr
    assert deployed.json()["version_id"] == entry["version_id"]
    return str(entry["version_id"])


def make_slow(project: Path, rows: int) -> str:
    """Deploy a version of daily_revenue whose query scans `rows` generated rows before it
    answers (an uncorrelated scalar subquery that is never NULL: the results do not change).
    The cost is paid once per staged unit, i.e. once per batch of consecutive partitions."""
    slow = f"{WINDOW} AND (SELECT sum(hash(i)) FROM range({rows}) AS r(i)) IS NOT NULL"
    return edit_model(project, WINDOW, slow)


# --- real processes -----------------------------------------------------------------------------


class Process:
    """A real `tidegate` process whose stdout and stderr are read line by line as they come."""

    def __init__(self, *args: str | Path, env: dict[str, str] | None = None) -> None:
        self.popen = spawn(*args, env=env)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._stdout_lines: queue.Queue[str | None] = queue.Queue()
        self._stderr_lines: queue.Queue[str | None] = queue.Queue()
        self._readers = [
            threading.Thread(
                target=self._read,
                args=(self.popen.stdout, self._stdout_lines, self.stdout),
                daemon=True,
            ),
            threading.Thread(
                target=self._read,
                args=(self.popen.stderr, self._stderr_lines, self.stderr),
                daemon=True,
            ),
        ]
        for reader in self._readers:
            reader.start()

    def _read(
        self, stream: IO[str] | None, lines: queue.Queue[str | None], into: list[str]
    ) -> None:
        assert stream is not None
        for line in stream:
            into.append(line)
            lines.put(line)
        lines.put(None)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send_signal(self, signum: int) -> None:
        self.popen.send_signal(signum)

    def wait_for_stderr(self, text: str, timeout: float = 20.0) -> str:
        """Block (bounded) until a stderr line containing `text` arrives; return it."""
        return self._wait_for("stderr", self._stderr_lines, text, timeout)

    def wait_for_stdout(self, text: str, timeout: float = 20.0) -> str:
        """Block (bounded) until a stdout line containing `text` arrives; return it."""
        return self._wait_for("stdout", self._stdout_lines, text, timeout)

    def _wait_for(
        self, name: str, lines: queue.Queue[str | None], text: str, timeout: float
    ) -> str:
        import time

        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {name} line with {text!r} in {timeout}s")
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"{name} closed before a line with {text!r}")
            if text in line:
                return line

    def finish(self, timeout: float, why: str = "") -> Result:
        """Wait (bounded) for the process to exit; on a timeout it is killed and the test fails
        (with `why`, when given, as the explanation)."""
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{why or repr(self.popen.args)}: no exit within {timeout}s, so it was killed. "
                f"stderr so far: {''.join(self.stderr)!r}"
            ) from None
        for reader in self._readers:
            reader.join(timeout=10)
        return Result(code, "".join(self.stdout), "".join(self.stderr))

    def kill(self) -> None:
        if self.alive():
            self.popen.kill()
        self.popen.wait(timeout=30)


@contextmanager
def running(*args: str | Path, env: dict[str, str] | None = None) -> Iterator[Process]:
    """Start a real tidegate process; it is killed on the way out if it is still alive."""
    process = Process(*args, env=env)
    try:
        yield process
    finally:
        process.kill()
