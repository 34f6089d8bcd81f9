"""Reconciliation: an input aggregate against an output aggregate, per partition."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from tidegate.domain.model import Reconciliation


@dataclass(frozen=True)
class ReconciliationResult:
    name: str
    source_value: str | None
    target_value: str | None
    tolerance: str
    passed: bool

    @property
    def message(self) -> str:
        verdict = "ok" if self.passed else "MISMATCH"
        return f"{self.name}: source {self.source_value} vs target {self.target_value} ({verdict})"


def _number(value: str | None) -> Decimal | None:
    # An aggregate over no rows is absent: the count or sum of nothing is zero.
    if value is None:
        return Decimal(0)
    try:
        return Decimal(value)
    except InvalidOperation:
        return None


def compare(rule: Reconciliation, source: str | None, target: str | None) -> ReconciliationResult:
    left, right = _number(source), _number(target)
    if left is None or right is None:
        passed = source == target
    else:
        passed = abs(left - right) <= Decimal(rule.tolerance)
    return ReconciliationResult(rule.name, source, target, rule.tolerance, passed)
