"""Run and attempt ids: one fixed, sortable, recognizable form."""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timezone

RUN_ID = re.compile(r"^run-\d{8}T\d{6}\d{6}Z-[0-9a-f]{6}$")


def _new(prefix: str) -> str:
    now = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{prefix}-{now}-{secrets.token_hex(3)}"


def new_run_id() -> str:
    return _new("run")


def new_attempt_id() -> str:
    return _new("att")


def looks_like_run_id(text: str) -> bool:
    return bool(RUN_ID.match(text)) or text.startswith("run-")


def new_gate_id() -> str:
    return _new("gate")


def new_taint_id() -> str:
    return _new("taint")


def new_stale_id() -> str:
    return _new("stale")
