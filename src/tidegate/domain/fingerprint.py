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


def column_fingerprint(
    definition: str, type_name: str, partitioning: Mapping[str, Any], upstream: Mapping[str, str]
) -> str:
    """What one output column of a model is: its definition (the select expression and all
    that decides the rows), type, the model's partitioning and what it reads upstream."""
    return fingerprint(
        definition, {"type": type_name, "partitioning": partitioning}, dict(upstream)
    )


def read_fingerprint(columns: Mapping[str, str]) -> str:
    """What a model reads of one upstream model: the fingerprints of the columns it reads. An
    upstream change to columns nobody reads leaves it alone."""
    payload = json.dumps(dict(sorted(columns.items())), separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def short(full: str) -> str:
    return full[:SHORT]
