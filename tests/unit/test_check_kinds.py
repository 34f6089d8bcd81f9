"""Judging the check kinds beyond violation counts: relative row counts, null ratios, distinct
counts, freshness and query checks, and how a unit's measurements reach each partition."""

from __future__ import annotations

from typing import Any

import pytest

from tidegate.domain.checks import contract_result, duration_seconds, judge
from tidegate.domain.model import CheckSpec, Severity
from tidegate.domain.partitions import Grain, parse_partition
from tidegate.execution.audit import judge_all
from tidegate.sql.statements import is_time_type

DAY1 = parse_partition("2025-03-01", Grain.DAY)
DAY2 = parse_partition("2025-03-02", Grain.DAY)


def check(kind: str, severity: Severity = Severity.BLOCKING, **params: Any) -> CheckSpec:
    return CheckSpec(f"{kind}_check", kind, severity, params)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90m", 5400), ("26h", 93600), ("2d", 172800), ("45s", 45), (" 1h ", 3600)],
)
def test_durations(text: str, seconds: int) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "0h", "1.5h", "2w", "-1d", "1 h", "1hour", "26"])
def test_what_is_not_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        duration_seconds(text)


# -- row_count relative to a baseline ------------------------------------------------------------


def test_no_previous_partition_passes_and_says_so() -> None:
    result = judge(check("row_count", relative_to="previous", min_ratio=0.8), 10, baseline=None)
    assert (result.passed, result.message, result.measured) == (True, "no previous partition", "10")


@pytest.mark.parametrize(
    ("rows", "baseline", "message"),
    [
        (1204, 2310, "1,204 rows, 0.521 of previous partition's 2,310 (min ratio 0.8)"),
        (4700, 2310, "4,700 rows, 2.03 of previous partition's 2,310 (max ratio 1.5)"),
        (5, 0, "5 rows against previous partition's 0 (max ratio 1.5)"),
    ],
)
def test_a_ratio_outside_its_bounds_fails_naming_both_counts(
    rows: int, baseline: int, message: str
) -> None:
    spec = check("row_count", Severity.WARN, relative_to="previous", min_ratio=0.8, max_ratio=1.5)
    result = judge(spec, rows, baseline=baseline)
    assert (result.passed, result.blocks, result.measured) == (False, False, str(rows))
    assert result.message == message


@pytest.mark.parametrize(
    ("rows", "baseline", "high"),
    # inclusive bounds; 0 rows against 0 is no change; without a max any growth passes
    [(80, 100, 1.5), (150, 100, 1.5), (100, 100, 1.5), (0, 0, 1.5), (1, 0, None)],
)
def test_a_ratio_within_its_bounds_passes(rows: int, baseline: int, high: float | None) -> None:
    params: dict[str, Any] = {"relative_to": "previous", "min_ratio": 0.8}
    if high is not None:
        params["max_ratio"] = high
    result = judge(check("row_count", **params), rows, baseline=baseline)
    assert (result.passed, result.message) == (True, "ok")


def test_a_source_relative_row_count_names_the_source() -> None:
    spec = check("row_count", relative_to="source", source="orders", min_ratio=0.5)
    result = judge(spec, 30, baseline=1000)
    assert not result.passed
    assert result.message == "30 rows, 0.03 of 1,000 in source orders (min ratio 0.5)"


def test_a_source_relative_row_count_without_the_count_fails_closed() -> None:
    spec = check("row_count", relative_to="source", source="orders", min_ratio=0.5)
    result = judge(spec, 30, baseline=None)
    assert not result.passed
    assert result.message == "rows of source orders in the window were not counted"


# -- null_ratio, distinct_count, freshness, query ------------------------------------------------


@pytest.mark.parametrize(
    ("nulls", "rows", "passed", "measured"),
    [
        (0, 0, True, "0"),
        (1, 100, True, "0.01"),
        (2, 100, False, "0.02"),
        (31, 1000, False, "0.031"),
    ],
)
def test_null_ratio(nulls: int, rows: int, passed: bool, measured: str) -> None:
    result = judge(check("null_ratio", column="email", max=0.01), nulls, rows=rows)
    assert (result.passed, result.measured) == (passed, measured)
    if not passed:
        assert result.message == (
            f"null ratio {measured} ({nulls:,} of {rows:,} rows) above max 0.01"
        )


# what a failed distinct_count says it expected, by its (min, max)
EXPECTED = {(2, None): "at least 2", (None, 3): "at most 3"}


@pytest.mark.parametrize(
    ("low", "high", "measured", "passed"),
    [
        (2, None, 2, True),
        (2, None, 1, False),
        (None, 3, 3, True),
        (None, 3, 4, False),
        (0, 0, 0, True),
    ],
)
def test_distinct_count_bounds_are_inclusive(
    low: int | None, high: int | None, measured: int, passed: bool
) -> None:
    params = {k: v for k, v in (("min", low), ("max", high)) if v is not None}
    result = judge(check("distinct_count", columns=["a", "b"], **params), measured)
    assert (result.passed, result.measured) == (passed, str(measured))
    if not passed:
        assert result.message == f"{measured} distinct value(s), expected {EXPECTED[(low, high)]}"


def test_freshness_is_judged_against_the_partition_end() -> None:
    spec = check("freshness", column="ts", max_age="4h")
    # DAY1 ends 2025-03-02 00:00:00: the newest row must be from 2025-03-01 20:00:00 on
    limit = DAY1.end - 4 * 3600
    exact = judge(spec, limit, end=DAY1.end)
    assert (exact.passed, exact.measured, exact.message) == (True, "2025-03-01 20:00:00", "ok")
    stale = judge(spec, limit - 1, end=DAY1.end)
    assert not stale.passed
    assert stale.measured == "2025-03-01 19:59:59"
    assert stale.message == "newest 2025-03-01 19:59:59, expected at least 2025-03-01 20:00:00"
    empty = judge(spec, None, end=DAY1.end)
    assert (empty.passed, empty.measured) == (False, "none")
    assert empty.message == "no ts value, expected at least 2025-03-01 20:00:00"


def test_a_query_check_passes_only_when_it_returns_no_rows() -> None:
    spec = check("query", Severity.WARN, sql="SELECT d FROM this WHERE a > b")
    assert judge(spec, 0).passed
    found = judge(spec, 7)
    assert (found.passed, found.blocks, found.message) == (False, False, "7 row(s) violate it")


# -- from a unit's measurements to each partition ------------------------------------------------


def judged(
    checks: tuple[CheckSpec, ...],
    measured: dict[str, dict[int | None, int | None]],
    rows: dict[int, int] | None = None,
    baselines: dict[int, dict[str, int | None]] | None = None,
) -> dict[int, dict[str, Any]]:
    results = judge_all(
        contract_result([]), checks, measured, [DAY1, DAY2], rows or {}, baselines or {}
    )
    return {start: {r.name: r for r in found[1:]} for start, found in results.items()}


def test_query_rows_outside_the_unit_count_against_every_partition() -> None:
    """A violating row with a NULL or foreign partition value belongs to no partition being
    written: it must not disappear, so every partition of the unit fails with it."""
    spec = check("query", sql="SELECT d FROM this")
    found = judged((spec,), {spec.name: {DAY1.start: 2, None: 1, DAY2.end: 4}})
    assert found[DAY1.start][spec.name].measured == "7"
    assert found[DAY2.start][spec.name].measured == "5"
    alone = judged((spec,), {spec.name: {DAY2.start: 3}})
    assert (alone[DAY1.start][spec.name].passed, alone[DAY2.start][spec.name].measured) == (
        True,
        "3",
    )


def test_a_partition_without_rows_has_no_newest_value_and_no_nulls() -> None:
    fresh = check("freshness", column="d", max_age="2d")
    nulls = check("null_ratio", column="d", max=0.0)
    found = judged(
        (fresh, nulls),
        {fresh.name: {DAY1.start: DAY1.start}, nulls.name: {DAY1.start: 1}},
        rows={DAY1.start: 4},
    )
    assert found[DAY1.start][fresh.name].passed
    assert found[DAY1.start][nulls.name].measured == "0.25"
    assert not found[DAY1.start][nulls.name].passed
    assert found[DAY2.start][fresh.name].measured == "none"
    assert not found[DAY2.start][fresh.name].passed
    assert found[DAY2.start][nulls.name].passed


def test_each_partition_is_judged_against_its_own_baseline() -> None:
    spec = check("row_count", relative_to="previous", min_ratio=0.5)
    found = judged(
        (spec,),
        {spec.name: {DAY1.start: 10, DAY2.start: 10}},
        baselines={DAY1.start: {spec.name: None}, DAY2.start: {spec.name: 40}},
    )
    assert found[DAY1.start][spec.name].message == "no previous partition"
    assert found[DAY2.start][spec.name].message == (
        "10 rows, 0.25 of previous partition's 40 (min ratio 0.5)"
    )


@pytest.mark.parametrize(
    ("column_type", "holds_time"),
    [
        ("DATE", True),
        ("TIMESTAMP", True),
        ("TIMESTAMP WITH TIME ZONE", True),
        ("TIMESTAMPTZ", True),
        ("TIMESTAMP_MS", True),
        ("VARCHAR", False),
        ("BIGINT", False),
    ],
)
def test_a_freshness_check_takes_every_date_and_timestamp_type(
    column_type: str, holds_time: bool
) -> None:
    assert is_time_type(column_type) is holds_time
