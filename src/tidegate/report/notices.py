"""What the outbox says was sent, and to whom: one line per row (pure, no I/O)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tidegate.notify.config import Consumer
from tidegate.notify.row import OutboxRow

SHOWN_PARTITIONS = 20


def _lineage(payload: dict[str, Any]) -> tuple[str, str | None, list[str]]:
    """(what, model, partitions) of an OpenLineage run event."""
    job = payload.get("job")
    model = job.get("name") if isinstance(job, dict) else None
    partitions: list[str] = []
    for output in payload.get("outputs") or []:
        facet = ((output or {}).get("facets") or {}).get("tidegate_partitions") or {}
        partitions += [str(p) for p in facet.get("partitions") or []]
    return f"lineage {payload.get('eventType', '?')}", model, partitions


def notice_doc(row: OutboxRow, consumers: Sequence[Consumer]) -> dict[str, Any]:
    """An outbox row for the report: the target, the consumers it serves, what it told of which
    model and partitions, and whether (and when) it was delivered."""
    try:
        payload = json.loads(row.payload)
    except ValueError:
        payload = None
    what, model, partitions, reason, run_id = "unreadable payload", None, [], None, None
    if isinstance(payload, dict) and payload.get("schema") == "tidegate.notice/v1":
        what, model = f"notice {payload.get('kind', '?')}", payload.get("model")
        partitions = [str(p) for p in payload.get("partitions") or []]
        reason, run_id = payload.get("reason"), payload.get("run_id")
    elif isinstance(payload, dict) and "eventType" in payload:
        what, model, partitions = _lineage(payload)
    return {
        "id": row.id,
        "target": row.target,
        "consumers": [
            c.name for c in consumers if c.notify == row.target and model in (None, c.model)
        ],
        "what": what,
        "model": model if isinstance(model, str) else None,
        "partitions": partitions[:SHOWN_PARTITIONS],
        "more_partitions": max(len(partitions) - SHOWN_PARTITIONS, 0),
        "reason": reason if isinstance(reason, str) else None,
        "run_id": run_id if isinstance(run_id, str) else None,
        "created_at": row.created_at,
        "delivered_at": row.delivered_at,
        "attempts": row.attempts,
        "last_error": row.last_error,
        "next_attempt_at": row.next_attempt_at,
    }
