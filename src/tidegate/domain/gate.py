"""Validation gates: whether a version's output, seen on sample partitions, may reach readers.

A gate passes when every sampled partition that could run passed its contract, its blocking
checks and its reconciliations, and at least one partition ran. A gate whose verdict differs from
an earlier gate of the same version over the same inputs is flaky: the version's output is not a
function of its inputs, and retrying until green would hide that.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Gate:
    gate_id: str
    model: str
    version_id: str
    passed: bool
    flaky: bool
    inputs: str  # digest of every sampled partition's input fingerprints
    partitions: tuple[str, ...]
    report: dict[str, Any]
    actor: str
    created_at: str


def sample(candidates: Sequence[int], size: int, seed: int) -> list[int]:
    """The oldest and newest candidates, then seeded random ones, in order; all if fewer."""
    ordered = sorted(set(candidates))
    if size >= len(ordered):
        return ordered
    if size <= 2:
        return [ordered[0], ordered[-1]][:size]
    middle = random.Random(seed).sample(ordered[1:-1], size - 2)
    return sorted([ordered[0], *middle, ordered[-1]])


def inputs_digest(fingerprints: Sequence[tuple[str, str, str | None]]) -> str:
    """One digest of (partition, input, fingerprint) triples, in any order."""
    canonical = json.dumps(sorted(fingerprints, key=lambda t: (t[0], t[1], t[2] or "")))
    return hashlib.sha256(canonical.encode()).hexdigest()


def is_flaky(earlier: Sequence[Gate], version_id: str, inputs: str, passed: bool) -> bool:
    return any(
        g.version_id == version_id and g.inputs == inputs and g.passed != passed for g in earlier
    )
