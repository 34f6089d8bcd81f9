"""Judging a check from what the engine measured. Measuring is the engine's job."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tidegate.domain.model import CheckSpec, Severity
from tidegate.domain.partitions import to_utc

# Kinds measured by a SELECT of their own that returns the violating rows: a `query` check's
# and a `relationships` check's (rows whose value the referenced table lacks)
QUERY_KINDS = frozenset({"query", "relationships"})
# Kinds whose measurement is a count of violating rows or keys: they pass at zero.
VIOLATION_KINDS = QUERY_KINDS | {
    "not_null",
    "unique",
    "accepted_values",
    "expression",
    "partition_bounds",
}
CHECK_KINDS = VIOLATION_KINDS | {
    "row_count",
    "null_ratio",
    "distinct_count",
    "freshness",
    "contract",
}

DURATION = re.compile(r"^(?P<amount>[0-9]+)(?P<unit>[smhd])$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


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


def repeated_keys(rows: Iterable[Sequence[str | None]], key: Sequence[int]) -> int:
    """A `unique` check's measure over rows whose values are text: how many key values (the
    values at positions `key`) more than one row holds, keys with a NULL part excluded. Right
    only where equal values have equal texts and unequal values unequal ones."""
    held = Counter(
        tuple(row[i] for i in key) for row in rows if all(row[i] is not None for i in key)
    )
    return sum(1 for count in held.values() if count > 1)


def duration_seconds(text: str) -> int:
    """Seconds of a duration such as "90m", "26h" or "2d"; ValueError for anything else."""
    match = DURATION.match(text.strip())
    if match is None or int(match["amount"]) == 0:
        raise ValueError(f"{text!r} is not a duration such as 90m, 26h or 2d")
    return int(match["amount"]) * UNIT_SECONDS[match["unit"]]


def judge(
    check: CheckSpec,
    measured: int | None,
    rows: int = 0,
    end: int | None = None,
    baseline: int | None = None,
) -> CheckResult:
    """Turn a measured value into a result with a message a user can act on.

    `measured` is what the engine measured (see PartitionProfile.measured); `rows` is the
    partition's row count (a null ratio's denominator), `end` its exclusive end in epoch seconds
    (what freshness is judged against) and `baseline` the row count a relative row_count
    compares with (None: no previous partition is published, or the source was not counted).
    """
    value = measured or 0
    text = str(value)
    if check.kind in VIOLATION_KINDS:
        passed = value == 0
        noun = "key(s) repeated" if check.kind == "unique" else "row(s) violate it"
        message = "ok" if passed else f"{value} {noun}"
    elif check.kind == "row_count" and "relative_to" in check.params:
        passed, message = _relative_rows(check, value, baseline)
    elif check.kind in ("row_count", "distinct_count"):
        low, high = check.params.get("min"), check.params.get("max")
        passed = (low is None or value >= low) and (high is None or value <= high)
        noun = "rows" if check.kind == "row_count" else "distinct value(s)"
        message = "ok" if passed else f"{value} {noun}, expected {_bounds(low, high)}"
    elif check.kind == "null_ratio":
        ratio = value / rows if rows else 0.0
        text = _number(ratio)
        passed = ratio <= check.params["max"]
        message = (
            "ok"
            if passed
            else f"null ratio {text} ({value:,} of {rows:,} rows) above max "
            f"{_number(check.params['max'])}"
        )
    elif check.kind == "freshness":
        if end is None:
            raise ValueError("freshness is judged against the partition's end")
        expected = end - duration_seconds(check.params["max_age"])
        passed = measured is not None and measured >= expected
        text = "none" if measured is None else _moment(measured)
        newest = f"no {check.params['column']} value" if measured is None else f"newest {text}"
        message = "ok" if passed else f"{newest}, expected at least {_moment(expected)}"
    else:
        raise ValueError(f"no judgment for check kind {check.kind!r}")
    return CheckResult(check.name, check.kind, check.severity, passed, text, message)


def _relative_rows(check: CheckSpec, rows: int, baseline: int | None) -> tuple[bool, str]:
    params = check.params
    if baseline is None:
        if params["relative_to"] == "previous":
            return True, "no previous partition"
        # a caller that read no source counts: fail closed rather than pass unmeasured
        return False, f"rows of source {params['source']} in the window were not counted"
    low, high = params.get("min_ratio"), params.get("max_ratio")
    what = (
        f"previous partition's {baseline:,}"
        if params["relative_to"] == "previous"
        else f"{baseline:,} in source {params['source']}"
    )
    if baseline == 0:
        # 0 rows against 0 is no change; any rows against 0 exceed every ratio
        if rows == 0 or high is None:
            return True, "ok"
        return False, f"{rows:,} rows against {what} (max ratio {_number(high)})"
    ratio = rows / baseline
    if low is not None and ratio < low:
        bound = f"min ratio {_number(low)}"
    elif high is not None and ratio > high:
        bound = f"max ratio {_number(high)}"
    else:
        return True, "ok"
    return False, f"{rows:,} rows, {_number(ratio)} of {what} ({bound})"


def _number(value: float) -> str:
    return f"{value:.3g}"


def _moment(epoch: int) -> str:
    return to_utc(epoch).strftime("%Y-%m-%d %H:%M:%S")


def contract_result(problems: list[str]) -> CheckResult:
    return CheckResult(
        name="contract",
        kind="contract",
        severity=Severity.BLOCKING,
        passed=not problems,
        measured=str(len(problems)),
        message="ok" if not problems else "; ".join(problems),
    )


def _bounds(low: int | None, high: int | None) -> str:
    if high is None:
        return f"at least {low}"
    if low is None:
        return f"at most {high}"
    return f"within [{low}, {high}]"
