"""Shared test kit: run tidegate, build example projects, and assert the guarantees."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tidegate.cli import main

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_MODELS = ("daily_revenue", "monthly_revenue", "revenue_report")
# the columns of each example model's published table, to compare engines value for value
EXAMPLE_COLUMNS = {
    "daily_revenue": "order_date, status, order_count, gross_revenue, net_revenue",
    "monthly_revenue": "month, status, order_count, gross_revenue, net_revenue",
    "revenue_report": "month, orders, cancelled_orders, gross_revenue, net_revenue, net_margin",
}


@dataclass(frozen=True)
class Result:
    exit_code: int
    stdout: str
    stderr: str
    # the progress events the command wrote to its --events-file (with `tidegate_events`)
    events: tuple[dict[str, Any], ...] = ()

    def json(self) -> Any:
        return json.loads(self.stdout)


# Deploying a version without a passed gate: for tests of what happens at run time when a bad
# version is active anyway (the gate has tests of its own).
FORCED = ("--force", "--reason", "the run-time audit is under test")


def tidegate(*args: str | Path) -> Result:
    """Run the CLI in this process (fast); use `spawn` when a real process is needed."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as done:
            code = int(done.code or 0) if not isinstance(done.code, str) else 1
    return Result(code, out.getvalue(), err.getvalue())


def cli(project: Path, *args: str, code: int = 0) -> Result:
    """`tidegate ARGS --project PROJECT`, which must exit with `code`."""
    result = tidegate(*args, "--project", project)
    assert result.exit_code == code, (args, result.stdout[-2000:], result.stderr)
    return result


def result_document(project: Path, *args: str, code: int = 0) -> dict[str, Any]:
    """`tidegate ARGS --json`'s result document: every command prints exactly one."""
    document: dict[str, Any] = cli(project, *args, "--json", code=code).json()
    return document


def events_of(path: Path) -> list[dict[str, Any]]:
    """The progress events in an --events-file (JSON lines), in order; none if it is missing."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tidegate_events(*args: str | Path) -> Result:
    """`tidegate ARGS --events-file FILE` in this process: its result, with `events` the
    progress events it wrote (a backfill's, a recovery's, a worker's)."""
    with tempfile.TemporaryDirectory(prefix="tidegate-events-") as folder:
        path = Path(folder) / "events.jsonl"
        result = tidegate(*args, "--events-file", path)
        return replace(result, events=tuple(events_of(path)))


def cli_events(project: Path, *args: str, code: int = 0) -> Result:
    """`tidegate ARGS --project PROJECT --events-file FILE`, which must exit with `code`; its
    result carries the progress events (`Result.events`)."""
    result = tidegate_events(*args, "--project", project)
    assert result.exit_code == code, (args, result.stdout[-2000:], result.stderr)
    return result


def spawn(
    *args: str | Path, env: dict[str, str] | None = None, **popen: Any
) -> subprocess.Popen[str]:
    """Start `tidegate ARGS` as a real process."""
    return subprocess.Popen(
        [sys.executable, "-m", "tidegate", *[str(a) for a in args]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        **popen,
    )


def ui_until_listening(*args: str | Path) -> Result:
    """`tidegate ui --port 0 --json ARGS` as a real process, stopped once it listens: what it
    printed (its one document, printed when listening) and its stderr."""
    process = spawn("ui", "--port", "0", "--json", *args)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
    finally:
        process.terminate()
        rest, stderr = process.communicate(timeout=30)
    return Result(0, line + rest, stderr)


def until_stopped(pid: int) -> None:
    """Wait for a child process to stop (SIGSTOP at a crash point)."""
    _, status = os.waitpid(pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), status


def continued_until_exit(pid: int) -> int:
    """Continue a stopped process until it exits (were it to reach a later checkpoint, it
    would stop there again); its exit code."""
    while True:
        os.kill(pid, signal.SIGCONT)
        _, status = os.waitpid(pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            return os.waitstatus_to_exitcode(status)


def run_process(
    *args: str | Path, env: dict[str, str] | None = None, timeout: float = 120
) -> Result:
    process = spawn(*args, env=env)
    stdout, stderr = process.communicate(timeout=timeout)
    return Result(process.returncode, stdout, stderr)


def run_process_events(
    *args: str | Path, env: dict[str, str] | None = None, timeout: float = 120
) -> Result:
    """`run_process` with `--events-file FILE`: its result, with `events` the progress events
    the process wrote."""
    with tempfile.TemporaryDirectory(prefix="tidegate-events-") as folder:
        path = Path(folder) / "events.jsonl"
        result = run_process(*args, "--events-file", path, env=env, timeout=timeout)
        return replace(result, events=tuple(events_of(path)))


_TEMPLATES: dict[tuple[int, int], Path] = {}


def remove_templates() -> None:
    """Remove the example projects initialized for this test session."""
    for template in _TEMPLATES.values():
        shutil.rmtree(template, ignore_errors=True)
    _TEMPLATES.clear()


def example_project(
    target: Path, rows_per_day: int = 20, seed: int = 1, deploy: bool = True
) -> Path:
    """An initialized orders project in `target`, built and (by default) deployed.

    Initialized once per (rows, seed) per test session and copied, to keep the suite fast.
    """
    key = (rows_per_day, seed)
    template = _TEMPLATES.get(key)
    if template is None:
        template = (
            Path(os.environ.get("TMPDIR", "/tmp"))
            / f"tidegate-template-{os.getpid()}-{rows_per_day}-{seed}"
        )
        shutil.rmtree(template, ignore_errors=True)
        result = tidegate(
            "init",
            template,
            "--example",
            "orders",
            "--rows-per-day",
            str(rows_per_day),
            "--seed",
            str(seed),
        )
        assert result.exit_code == 0, result.stderr
        _TEMPLATES[key] = template
    shutil.copytree(template, target)
    if deploy:
        build_and_deploy(target)
    return target


def build_and_deploy(project: Path) -> None:
    """`tidegate build`, then a deploy of every model of the orders example."""
    assert tidegate("build", "--project", project).exit_code == 0
    for model in EXAMPLE_MODELS:
        result = tidegate("deploy", model, "--project", project)
        assert result.exit_code == 0, result.stderr


def warehouse_rows(
    project: Path, query: str, params: list[Any] | None = None
) -> list[tuple[Any, ...]]:
    """Read the warehouse directly (only when no writer holds it)."""
    import duckdb

    con = duckdb.connect(str(project / "warehouse.duckdb"), read_only=True)
    try:
        return list(con.execute(query, params or []).fetchall())
    finally:
        con.close()


def oracle_daily_revenue(project: Path) -> list[tuple[Any, ...]]:
    """An independent GROUP BY over orders: what daily_revenue must hold."""
    return warehouse_rows(
        project,
        "SELECT CAST(order_ts AS DATE) AS d, status, count(*), sum(gross_amount), "
        "sum(gross_amount - discount - refund) FROM orders GROUP BY ALL ORDER BY d, status",
    )


def published_daily_revenue(project: Path) -> list[tuple[Any, ...]]:
    return warehouse_rows(
        project,
        "SELECT order_date, status, order_count, gross_revenue, net_revenue "
        "FROM daily_revenue ORDER BY order_date, status",
    )


def assert_exactly_once(actual: list[tuple[Any, ...]], oracle: list[tuple[Any, ...]]) -> None:
    """Same rows, each exactly as often: no duplicates, nothing missing, nothing extra."""
    from collections import Counter

    missing = Counter(oracle) - Counter(actual)
    extra = Counter(actual) - Counter(oracle)
    assert not missing and not extra, f"missing {list(missing)[:5]}, extra {list(extra)[:5]}"


def assert_no_staging(project: Path) -> None:
    """Staging is in memory: the warehouse file holds only published tables, the markers and
    the shadow tables of validated versions."""
    rows = warehouse_rows(
        project,
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_schema NOT IN ('main', '_tidegate', '_tidegate_shadow')",
    )
    assert rows == [], f"staging tables in the warehouse file: {rows}"


def state_dump(project: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every ledger table, to prove that a refused command wrote nothing."""
    path = project / ".tidegate" / "state.db"
    if not path.exists():
        return {}
    con = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        return {t: sorted(con.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables}
    finally:
        con.close()


def warehouse_execute(project: Path, statement: str) -> None:
    """Write to the warehouse directly, as another process would (only when no writer holds
    it)."""
    import duckdb

    con = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        con.execute(statement)
    finally:
        con.close()


def warehouse_dump(project: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table in the warehouse."""
    import duckdb

    con = duckdb.connect(str(project / "warehouse.duckdb"), read_only=True)
    try:
        tables = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables ORDER BY 1, 2"
        ).fetchall()
        return {
            f"{s}.{t}": sorted(con.execute(f'SELECT * FROM "{s}"."{t}"').fetchall(), key=repr)
            for s, t in tables
        }
    finally:
        con.close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (for a `tidegate ui --port`)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int) -> bool | None:
    """For wait_until: True once something accepts connections on 127.0.0.1:`port`."""
    with socket.socket() as probe:
        return True if probe.connect_ex(("127.0.0.1", port)) == 0 else None


class Hook:
    """A consumer's real HTTP endpoint on 127.0.0.1: down (503) until `up` is set."""

    def __init__(self) -> None:
        self.up = threading.Event()
        self.received: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []  # the Authorization header of each POST
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.authorizations.append(self.headers.get("Authorization"))
                if not hook.up.is_set():
                    self.send_response(503)
                    self.end_headers()
                    return
                hook.received.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
