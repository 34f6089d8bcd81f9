"""Judging a check from what the engine measured. Measuring is the engine's job."""

from __future__ import annotations

from dataclasses import dataclass

from tidegate.domain.model import CheckSpec, Severity

# Kinds whose measurement is a count of violating rows or keys: they pass at zero.
VIOLATION_KINDS = frozenset(
    {"not_null", "unique", "accepted_values", "expression", "partition_bounds"}
)
CHECK_KINDS = VIOLATION_KINDS | {"row_count", "contract"}


@dataclass(frozen=True)
class CheckResult:
    name: str
    kind: str
    severity: Severity
    passed: bool
    measured: str
    message: str

    @property
    def blocks(self) -> bool:
        return not self.passed and self.severity is Severity.BLOCKING


def judge(check: CheckSpec, measured: int) -> CheckResult:
    """Turn a measured value into a result with a message a user can act on."""
    if check.kind in VIOLATION_KINDS:
        passed = measured == 0
        noun = "key(s) repeated" if check.kind == "unique" else "row(s) violate it"
        message = "ok" if passed else f"{measured} {noun}"
    elif check.kind == "row_count":
        low, high = check.params.get("min"), check.params.get("max")
        passed = (low is None or measured >= low) and (high is None or measured <= high)
        message = "ok" if passed else f"{measured} rows, expected within [{low}, {high}]"
    else:
        raise ValueError(f"no judgment for check kind {check.kind!r}")
    return CheckResult(check.name, check.kind, check.severity, passed, str(measured), message)


def contract_result(problems: list[str]) -> CheckResult:
    return CheckResult(
        name="contract",
        kind="contract",
        severity=Severity.BLOCKING,
        passed=not problems,
        measured=str(len(problems)),
        message="ok" if not problems else "; ".join(problems),
    )
