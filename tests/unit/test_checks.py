"""Judging a measured check: pass/fail, blocking/warn, and a message a user can act on."""

from __future__ import annotations

import pytest

from tidegate.domain.checks import (
    CHECK_KINDS,
    VIOLATION_KINDS,
    contract_result,
    judge,
    repeated_keys,
)
from tidegate.domain.model import CheckSpec, Severity

VIOLATION_PARAMS = {
    "not_null": {"columns": ["a"]},
    "unique": {"columns": ["a", "b"]},
    "accepted_values": {"column": "a", "values": ["x", "y"]},
    "expression": {"expression": "a <= b"},
    "query": {"sql": "SELECT d FROM this WHERE a > b"},
    "relationships": {
        "column": "a",
        "to": "parents",
        "field": "id",
        "sql": 'SELECT * FROM "this" WHERE NOT EXISTS(SELECT 1 FROM parents WHERE id = a)',
    },
    "partition_bounds": {"column": "d", "keyed": False},
}


def spec(kind: str, severity: Severity = Severity.BLOCKING, **params: object) -> CheckSpec:
    return CheckSpec(f"{kind}_check", kind, severity, params or VIOLATION_PARAMS.get(kind, {}))


def test_kinds() -> None:
    assert set(VIOLATION_PARAMS) == VIOLATION_KINDS
    assert (
        VIOLATION_KINDS | {"row_count", "null_ratio", "distinct_count", "freshness", "contract"}
        == CHECK_KINDS
    )


@pytest.mark.parametrize("kind", sorted(VIOLATION_KINDS))
def test_violation_kinds_pass_only_at_zero(kind: str) -> None:
    ok = judge(spec(kind), 0)
    assert (ok.passed, ok.message, ok.measured, ok.blocks) == (True, "ok", "0", False)
    assert (ok.name, ok.kind, ok.severity) == (f"{kind}_check", kind, Severity.BLOCKING)
    bad = judge(spec(kind), 3)
    assert not bad.passed
    assert bad.blocks
    assert bad.measured == "3"
    noun = "key(s) repeated" if kind == "unique" else "row(s) violate it"
    assert bad.message == f"3 {noun}"


@pytest.mark.parametrize("kind", sorted(VIOLATION_KINDS))
def test_a_failing_warn_check_does_not_block(kind: str) -> None:
    result = judge(spec(kind, Severity.WARN), 1)
    assert not result.passed
    assert not result.blocks


# what a failed bounds check says it expected, by its (min, max)
EXPECTED = {(1, 1): "within [1, 1]", (None, 10): "at most 10", (5, None): "at least 5"}


@pytest.mark.parametrize(
    ("low", "high", "measured", "passed"),
    [
        (1, 1, 1, True),
        (1, 1, 0, False),
        (1, 1, 2, False),
        (None, 10, 0, True),
        (None, 10, 11, False),
        (5, None, 5, True),
        (5, None, 4, False),
        (5, None, 10**9, True),
        (None, None, 0, True),
    ],
)
def test_row_count_bounds_are_inclusive(
    low: int | None, high: int | None, measured: int, passed: bool
) -> None:
    params = {k: v for k, v in (("min", low), ("max", high)) if v is not None}
    result = judge(CheckSpec("rows", "row_count", Severity.BLOCKING, params), measured)
    assert result.passed is passed
    assert result.blocks is not passed
    assert result.measured == str(measured)
    if passed:
        assert result.message == "ok"
    else:
        assert result.message == f"{measured} rows, expected {EXPECTED[(low, high)]}"


def test_unknown_and_contract_kinds_are_not_judged_from_a_number() -> None:
    with pytest.raises(ValueError, match="no judgment for check kind 'contract'"):
        judge(CheckSpec("contract", "contract", Severity.BLOCKING), 0)
    with pytest.raises(ValueError, match="no judgment"):
        judge(CheckSpec("x", "no_such_kind", Severity.BLOCKING), 0)


def test_contract_result() -> None:
    ok = contract_result([])
    assert (ok.name, ok.kind, ok.passed, ok.measured, ok.message) == (
        "contract",
        "contract",
        True,
        "0",
        "ok",
    )
    bad = contract_result(["column a is missing", "column b is BIGINT, contract says TEXT"])
    assert not bad.passed
    assert bad.blocks
    assert bad.measured == "2"
    assert bad.message == "column a is missing; column b is BIGINT, contract says TEXT"


def test_repeated_keys_counts_each_key_held_twice_or_more_once() -> None:
    rows = [
        ("2025-01-01", "a", "1"),
        ("2025-01-01", "a", "2"),
        ("2025-01-01", "a", "3"),  # a third row of the same key: still one repeated key
        ("2025-01-01", "b", "4"),
        ("2025-01-02", "b", "5"),
        ("2025-01-02", "b", "6"),
        (None, "c", "7"),  # keys with a NULL part are never repeated
        (None, "c", "8"),
    ]
    assert repeated_keys(rows, [0, 1]) == 2
    assert repeated_keys(rows, [1]) == 3
    assert repeated_keys(rows, [2]) == 0
    assert repeated_keys([], [0]) == 0
