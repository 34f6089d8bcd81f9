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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidegate.domain.model import Version


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


@dataclass(frozen=True)
class DeployDecision:
    allowed: bool
    reason: str
    gate_id: str | None = None


def deploy_decision(
    version: Version,
    active: str | None,
    gates: Sequence[Gate],
    affected: Mapping[str, Sequence[str]],
) -> DeployDecision:
    """Whether `version` may become active: its newest gate must have passed. The first
    version of a model needs none (nothing reads the model yet). A version that removes or
    retypes a column downstream models read (`affected`: model → those columns, measured
    against the active version, whatever the build called the change) is refused: they must
    migrate first."""
    label = f"{version.model} v{version.seq}"
    if affected:
        readers = ", ".join(
            f"{m} ({', '.join(sorted(cols))})" for m, cols in sorted(affected.items())
        )
        return DeployDecision(
            False,
            f"{label} is a breaking change to columns downstream models read: {readers}; "
            "migrate them first, or keep the columns and declare a compatibility window "
            '([deprecated] COLUMN = "YYYY-MM-DD") that has ended before removing them, or '
            "--force --reason TEXT",
        )
    if active is None:
        return DeployDecision(True, f"first version of {version.model}: no gate required")
    if version.spec.update is not None:
        # nothing to run into a shadow table: the audit is in each range's transaction
        return DeployDecision(
            True, f"{label} updates a table in place: each range is audited as it is written"
        )
    mine = [g for g in gates if g.version_id == version.version_id]
    if not mine:
        return DeployDecision(
            False,
            f"{label} has no validation gate; run `tidegate validate {version.model} "
            f"--version v{version.seq}` first (or --force --reason TEXT)",
        )
    newest = mine[-1]
    if not newest.passed:
        return DeployDecision(
            False,
            f"{label}'s newest gate {newest.gate_id} failed; fix the model and validate again "
            "(or --force --reason TEXT)",
            newest.gate_id,
        )
    flaky = " (flaky: an earlier gate on the same inputs failed)" if newest.flaky else ""
    return DeployDecision(True, f"gate {newest.gate_id} passed{flaky}", newest.gate_id)
