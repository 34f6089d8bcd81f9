"""The reference workload the benchmarks share: daily_revenue over the orders example's year,
its statement and checks as raw DuckDB runs them, and fresh copies of a project. Imports no
engine: a benchmark measuring processes keeps its own memory small (a child's peak RSS may start
at its parent's size)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

YEAR = "2025-01-01..2025-12-31"
DAILY = (
    "SELECT CAST(order_ts AS DATE) AS order_date, status, count(*) AS order_count, "
    "CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross_revenue, "
    "CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue "
    "FROM orders WHERE order_ts >= $start AND order_ts < $end "
    "GROUP BY CAST(order_ts AS DATE), status"
)
# The same audits tidegate runs per partition: uniqueness, accepted values, the invariant, the
# partition bounds, and three reconciliations against the source.
CHECKS = (
    "SELECT count(*) FROM (SELECT order_date, status FROM staged GROUP BY ALL HAVING count(*) > 1)",
    "SELECT count(*) FROM staged WHERE status NOT IN "
    "('completed', 'shipped', 'cancelled', 'refunded')",
    "SELECT count(*) FROM staged WHERE NOT coalesce(net_revenue <= gross_revenue, false)",
    "SELECT count(*) FROM staged WHERE order_date < $start OR order_date >= $end",
    "SELECT count(*), sum(gross_amount), sum(gross_amount - discount - refund) FROM orders "
    "WHERE order_ts >= $start AND order_ts < $end",
    "SELECT sum(order_count), sum(gross_revenue), sum(net_revenue) FROM staged",
)


def fresh_project(template: Path, folder: Path, name: str) -> Path:
    target = folder / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(template, target)
    os.sync()
    return target
