"""The deploy gate seam: whether a version may become active.

Until validation gates are recorded, every version passes except a breaking change, which must be
deployed with `--force --reason` because readers of the table would break.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidegate.domain.model import ChangeKind, Version


@dataclass(frozen=True)
class GateDecision:
    allowed: bool
    reason: str


def deploy_gate(version: Version) -> GateDecision:
    if version.change is ChangeKind.BREAKING:
        return GateDecision(
            False,
            f"{version.model} v{version.seq} is a breaking change to the table's columns; "
            "deploy it with --force --reason TEXT once readers are ready",
        )
    return GateDecision(True, "no gate is required for this change")
