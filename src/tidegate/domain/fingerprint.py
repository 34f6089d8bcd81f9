"""Fingerprints: a stable hash of a model's normalized logic, config and upstream versions."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

SHORT = 12


def fingerprint(normalized_sql: str, config: Mapping[str, Any], upstream: Mapping[str, str]) -> str:
    payload = json.dumps(
        {"sql": normalized_sql, "config": config, "upstream": dict(sorted(upstream.items()))},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def short(full: str) -> str:
    return full[:SHORT]
