"""What a running job's MiniCluster tells over its REST API: restarts and checkpoints."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from tidegate.flink.places import plain_path

TIMEOUT_SECONDS = 5.0


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


def _get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=TIMEOUT_SECONDS) as r:
        return json.loads(r.read() or b"{}")
