"""The demo's daily_revenue equals an independent GROUP BY over orders, cent-exact."""

from __future__ import annotations

from pathlib import Path

from tests.kit import (
    assert_exactly_once,
    assert_no_staging,
    oracle_daily_revenue,
    published_daily_revenue,
    tidegate,
    warehouse_rows,
)


def test_demo_matches_an_independent_group_by(tmp_path: Path) -> None:
    kept = tmp_path / "demo"
    result = tidegate("demo", "--rows-per-day", "200", "--keep", kept)
    assert result.exit_code == 0, result.stderr

    oracle = oracle_daily_revenue(kept)
    assert len({row[0] for row in oracle}) == 365
    assert_exactly_once(published_daily_revenue(kept), oracle)
    assert_no_staging(kept)

    status = tidegate("status", "--project", kept, "--json").json()
    counts = {m["model"]: m["partitions"] for m in status["models"]}
    assert counts["daily_revenue"]["published"] == 365
    assert counts["monthly_revenue"]["published"] == 12
    assert counts["revenue_report"]["published"] == 12

    # the two downstream levels reconcile with the daily level, to the cent
    monthly = warehouse_rows(
        kept, "SELECT sum(order_count), sum(gross_revenue), sum(net_revenue) FROM monthly_revenue"
    )
    report = warehouse_rows(
        kept, "SELECT sum(orders), sum(gross_revenue), sum(net_revenue) FROM revenue_report"
    )
    daily = warehouse_rows(
        kept, "SELECT sum(order_count), sum(gross_revenue), sum(net_revenue) FROM daily_revenue"
    )
    assert monthly == daily == report


def test_demo_default_scale_leaves_nothing_behind() -> None:
    result = tidegate("demo", "--json")
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert document["orders_rows"] == 365 * 1000
    assert document["kept"] is None
    daily = next(m for m in document["status"]["models"] if m["model"] == "daily_revenue")
    assert daily["partitions"]["published"] == 365
