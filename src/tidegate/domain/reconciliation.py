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
    # why it failed when the values alone do not say it (not kept in the ledger)
    note: str | None = None

    @property
    def message(self) -> str:
        verdict = "ok" if self.passed else "MISMATCH"
        note = f": {self.note}" if self.note else ""
        return (
            f"{self.name}: source {self.source_value} vs target {self.target_value} "
            f"({verdict}{note})"
        )


@dataclass(frozen=True)
class Sides:
    """The rows each side of a partition's reconciliations aggregated, and whether the
    partition may be empty (the min_rows of the input they read is 0)."""

    source_rows: int
    target_rows: int
    may_be_empty: bool


def _number(value: str | None) -> Decimal | None:
    # An aggregate over rows that are all NULL is absent: the sum of nothing is zero.
    if value is None:
        return Decimal(0)
    try:
        return Decimal(value)
    except InvalidOperation:
        return None


def compare(
    rule: Reconciliation, source: str | None, target: str | None, sides: Sides
) -> ReconciliationResult:
    if not sides.source_rows or not sides.target_rows:
        # An aggregate over no rows is NULL on either side: NULL = NULL proves nothing. It
        # passes only when neither side has rows and the partition was allowed to be empty.
        passed = not sides.source_rows and not sides.target_rows and sides.may_be_empty
        note = None if passed else _nothing(sides)
        return ReconciliationResult(rule.name, source, target, rule.tolerance, passed, note)
    left, right = _number(source), _number(target)
    if left is None or right is None:
        passed = source == target
    else:
        passed = abs(left - right) <= Decimal(rule.tolerance)
    return ReconciliationResult(rule.name, source, target, rule.tolerance, passed)


def _nothing(sides: Sides) -> str:
    if sides.source_rows:
        return f"the target has no rows against {sides.source_rows} source row(s)"
    if sides.target_rows:
        return f"the source has no rows against {sides.target_rows} target row(s)"
    return "neither side has rows, and the input's min_rows does not allow an empty partition"
