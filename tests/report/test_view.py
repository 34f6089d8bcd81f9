"""The view model's pure parts: failing checks, queued cells, health lines, numbers for people."""

from __future__ import annotations

from tidegate.report import cells as grid
from tidegate.report.data import check_docs, health, throughput, utc_second
from tidegate.report.rows import FailingCheck

DAY0 = 1_738_368_000  # 2025-02-01


def failing(attempt_id: str, resolved_by: str | None = None) -> FailingCheck:
    return FailingCheck(
        "daily_revenue",
        "day",
        DAY0,
        DAY0 + 86400,
        "run-1",
        attempt_id,
        "v-1",
        "not_feb_1",
        "expression",
        "blocking",
        "1 row(s) violate it",
        "2025-02-02T00:00:00.123456+00:00",
        resolved_by,
        "2025-02-03T04:05:06.789012+00:00" if resolved_by else None,
    )


def test_resolved_check_failures_say_by_which_run_and_follow_the_open_ones() -> None:
    docs = check_docs([failing("a1", "run-2"), failing("a2")], {})
    assert [d["attempt_id"] for d in docs] == ["a2", "a1"]
    open_, fixed = docs
    assert (open_["resolved_by"], open_["resolved_at"]) == (None, None)
    assert (fixed["resolved_by"], fixed["resolved_at"]) == (
        "run-2",
        "2025-02-03T04:05:06Z",
    )
    assert fixed["partition"] == "2025-02-01"


def test_a_model_health_is_one_line_and_a_proportional_bar() -> None:
    counts = dict.fromkeys(grid.STATES, 0)
    counts.update(published=1340, failed=3, queued=12, missing=10, tainted=0)
    shown = health("daily_revenue", counts)
    assert shown["line"] == ("daily_revenue: 1,340 published · 3 failed · 12 queued · 10 missing")
    assert [state for state, _ in shown["bar"]] == ["published", "failed", "queued", "missing"]
    assert abs(sum(share for _, share in shown["bar"]) - 1) < 1e-3
    assert dict(shown["bar"])["failed"] == round(3 / 1365, 4)
    assert health("empty", dict.fromkeys(grid.STATES, 0)) == {
        "line": "empty: no partitions due",
        "bar": [],
    }


def test_times_are_to_the_second_in_utc() -> None:
    assert utc_second("2025-02-03T04:05:06.789012+00:00") == "2025-02-03T04:05:06Z"
    assert utc_second("2025-02-03T05:05:06.999999+01:00") == "2025-02-03T04:05:06Z"
    assert utc_second(None) is None
    assert utc_second("not a time") == "not a time"


def test_throughput_is_rounded_for_people() -> None:
    assert throughput(210_726, 1000.0) == (12644, "12,644 partitions/min")
    assert throughput(1, 150.0) == (0.4, "0.4 partitions/min")
    assert throughput(0, 10.0) == (None, None)
    assert throughput(5, 0.0) == (None, None)
