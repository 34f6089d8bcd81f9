"""A running job's MiniCluster over its REST API: restarts and checkpoints, and savepoints
taken while it runs (by another process than the one running it: validate)."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidegate.flink.places import plain_path

TIMEOUT_SECONDS = 5.0
POLL_SECONDS = 0.2
TRACEBACK = "Traceback (most recent call last):"
# a Python traceback's last line: `UnicodeDecodeError: 'utf-8' codec can't decode…`
PYTHON_ERROR = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit): ")


@dataclass(frozen=True)
class JobMetrics:
    restarts: int
    completed_checkpoints: int
    latest_checkpoint: str | None  # the newest completed checkpoint's path


def job_metrics(port: int, job_id: str) -> JobMetrics:
    restarts = _get(port, f"/jobs/{job_id}/metrics?get=numRestarts")
    checkpoints = _get(port, f"/jobs/{job_id}/checkpoints")
    latest = (checkpoints.get("latest") or {}).get("completed") or {}
    return JobMetrics(
        restarts=int(restarts[0]["value"]) if restarts else 0,
        completed_checkpoints=int((checkpoints.get("counts") or {}).get("completed", 0)),
        latest_checkpoint=plain_path(path) if (path := latest.get("external_path")) else None,
    )


def latest_exception(port: int, job_id: str) -> str | None:
    """The root cause of the job's newest failure (a restart's too), one line."""
    history = _get(port, f"/jobs/{job_id}/exceptions").get("exceptionHistory") or {}
    entries = history.get("entries") or []
    if not entries:
        return None
    return root_cause(str(entries[0].get("stacktrace") or entries[0].get("exceptionName")))


def root_cause(trace: str) -> str:
    """The error a Java trace comes down to: the Python exception it carries (a Python
    function's traceback is inside it), else its last `Caused by:`, else its first line."""
    lines = [line.strip() for line in trace.splitlines() if line.strip()]
    traceback = next((i for i, line in enumerate(lines) if TRACEBACK in line), None)
    after = [] if traceback is None else lines[traceback:]
    python = [line for line in after if PYTHON_ERROR.match(line)]
    if python:
        return python[-1][:500]
    causes = [line for line in lines if line.startswith("Caused by:")]
    line = causes[-1] if causes else (lines or ["unknown error"])[0]
    return line.removeprefix("Caused by: ")[:500]


def trigger_savepoint(address: str, job_id: str, directory: Path, timeout: float) -> str:
    """Take a savepoint of the job running at `address` into `directory`, leaving it running;
    returns the savepoint's path. RuntimeError when Flink refuses or it takes too long."""
    body = {"target-directory": directory.resolve().as_uri(), "cancel-job": False}
    request = urllib.request.Request(
        f"{address}/jobs/{job_id}/savepoints",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
        trigger = json.loads(response.read())["request-id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(
            f"{address}/jobs/{job_id}/savepoints/{trigger}", timeout=TIMEOUT_SECONDS
        ) as response:
            answer = json.loads(response.read())
        if answer["status"]["id"] == "COMPLETED":
            operation = answer.get("operation") or {}
            if "location" not in operation:
                cause = (operation.get("failure-cause") or {}).get("stack-trace", "")
                raise RuntimeError((cause.strip().splitlines() or ["the savepoint failed"])[0])
            return plain_path(str(operation["location"]))
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"no savepoint within {timeout:g}s")


def _get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=TIMEOUT_SECONDS) as r:
        return json.loads(r.read() or b"{}")
