"""Sources read ahead (execution/read_ahead.py), on DuckDB: one-day batches read a source once
per stretch of 32 days, and record exactly what reading each day alone records — the input
fingerprints and the reconciliations' source side — checked against a run that reads each day
alone and against the warehouse itself. A view, or a source-row budget, turns it off."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.kit import example_project, tidegate, warehouse_rows
from tidegate.engines.duckdb import DuckDBEngine

FIRST = datetime(2025, 1, 1)
EPOCH = date(1970, 1, 1)
DAYS = 40
RANGE = "2025-01-01..2025-02-09"

Window = tuple[datetime, datetime]


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[Window]:
    """The window of every pass over a source (not over a staging table) in this process."""
    seen: list[Window] = []
    profile = DuckDBEngine.profile

    def recorded_profile(
        self: DuckDBEngine,
        table: str,
        staged: bool,
        partition_column: str,
        grain: str,
        bounds: Mapping[str, Any] | None,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        if not staged and bounds is not None:
            seen.append((bounds["start"], bounds["end"]))
        return profile(self, table, staged, partition_column, grain, bounds, *args, **kwargs)

    monkeypatch.setattr(DuckDBEngine, "profile", recorded_profile)
    return seen


def backfill(project: Path, budget: int | None = None, exit_code: int = 0) -> None:
    """One-day batches over 40 days, two in flight, from a plan file (with a source-row budget,
    which a plan file may set), exiting with `exit_code`."""
    plan = project / "plan.toml"
    plan.write_text(
        f'model = "daily_revenue"\npartitions = "{RANGE}"\nbatch_size = 1\nmax_concurrency = 2\n'
        + ("" if budget is None else f"max_source_rows = {budget}\n")
    )
    done = tidegate("backfill", "--file", plan, "--project", project)
    assert done.exit_code == exit_code, done.stderr


Recorded = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]


def recorded(project: Path) -> Recorded:
    """Per partition: each source input's fingerprint and each reconciliation's source side."""
    con = sqlite3.connect(project / ".tidegate" / "state.db")
    try:
        inputs = con.execute(
            "SELECT a.partition_start, i.upstream, i.range_start, i.range_end, i.fingerprint "
            "FROM attempt_inputs i JOIN attempts a USING (attempt_id) "
            "WHERE a.model = 'daily_revenue' AND i.kind = 'source' ORDER BY 1, 2"
        ).fetchall()
        sides = con.execute(
            "SELECT a.partition_start, r.name, r.source_value, r.passed "
            "FROM reconciliations r JOIN attempts a USING (attempt_id) "
            "WHERE a.model = 'daily_revenue' ORDER BY 1, 2"
        ).fetchall()
        return inputs, sides
    finally:
        con.close()


def days(first: int, count: int) -> list[Window]:
    return [
        (FIRST + timedelta(days=d), FIRST + timedelta(days=d + 1))
        for d in range(first, first + count)
    ]


def test_a_stretch_is_read_once_and_records_what_each_day_alone_records(
    tmp_path: Path, passes: list[Window]
) -> None:
    ahead = example_project(tmp_path / "ahead")
    backfill(ahead)
    # 40 one-day batches, two in flight: two passes, over 32 days and over the 8 after them
    assert passes == [
        (FIRST, FIRST + timedelta(days=32)),
        (FIRST + timedelta(days=32), FIRST + timedelta(days=DAYS)),
    ]
    passes.clear()
    alone = example_project(tmp_path / "alone")
    # a source-row budget counts what is read: every batch reads only its own window
    backfill(alone, budget=10**9)
    assert sorted(passes) == days(0, DAYS)
    found = recorded(ahead)
    assert found == recorded(alone)
    inputs, sides = found
    # 40 partitions, one source input and three reconciliations each, every one passed
    assert len(inputs) + len(sides) == DAYS * 4
    assert all(row[-1] == 1 for row in sides)
    # the source side is the warehouse's own sums of each day
    oracle = warehouse_rows(
        ahead,
        "SELECT CAST(order_ts AS DATE), count(*), sum(gross_amount), "
        "sum(gross_amount - discount - refund) FROM orders "
        "WHERE order_ts >= ? AND order_ts < ? GROUP BY 1 ORDER BY 1",
        [FIRST, FIRST + timedelta(days=DAYS)],
    )
    side = {(start, name): value for start, name, value, _ in sides}
    for day, count, gross, net in oracle:
        start = (day - EPOCH).days * 86400
        assert side[(start, "row_count")] == str(count)
        assert side[(start, "gross_amount")] == str(gross)
        assert side[(start, "net_amount")] == str(net)


def test_a_view_is_read_in_each_batch_window(tmp_path: Path, passes: list[Window]) -> None:
    project = example_project(tmp_path / "proj", deploy=False)
    with duckdb.connect(str(project / "warehouse.duckdb")) as con:
        con.execute("CREATE VIEW orders_feed AS SELECT * FROM orders")
    config = project / "tidegate.toml"
    config.write_text(config.read_text().replace('table = "orders"', 'table = "orders_feed"'))
    for step in (("build",), ("deploy", "daily_revenue")):
        done = tidegate(*step, "--project", project)
        assert done.exit_code == 0, done.stderr
    backfill(project)
    # a view's rows may come from files another process writes: no day is read ahead
    assert sorted(passes) == days(0, DAYS)


# a reconciliation whose source side fails on one oversized order
STRICT = """
[[reconciliations]]
name = "strict_gross"
source = "orders"
source_expression = "sum(CAST(gross_amount AS DECIMAL(12, 2)))"
target_expression = "sum(gross_revenue)"
*/"""


def with_one_bad_day(project: Path) -> Path:
    """The project with the strict reconciliation deployed and one order on 2025-01-20 whose
    gross does not fit DECIMAL(12, 2): reading that day fails."""
    model = project / "models" / "daily_revenue.sql"
    head, tail = model.read_text().split("*/", 1)
    model.write_text(head + STRICT + tail)
    for step in (("build",), ("deploy", "daily_revenue")):
        done = tidegate(*step, "--project", project)
        assert done.exit_code == 0, done.stderr
    with duckdb.connect(str(project / "warehouse.duckdb")) as con:
        con.execute(
            "UPDATE orders SET gross_amount = 99999999999.00 WHERE order_id = "
            "(SELECT min(order_id) FROM orders WHERE CAST(order_ts AS DATE) = DATE '2025-01-20')"
        )
    return project


def unpublished(project: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(project / ".tidegate" / "state.db")
    try:
        return con.execute(
            "SELECT partition_start, state, error FROM attempts "
            "WHERE model = 'daily_revenue' AND state != 'published' ORDER BY 1"
        ).fetchall()
    finally:
        con.close()


def test_a_stretch_that_fails_to_read_fails_only_the_partition_at_fault(
    tmp_path: Path, passes: list[Window]
) -> None:
    ahead = with_one_bad_day(example_project(tmp_path / "ahead", deploy=False))
    backfill(ahead, exit_code=1)
    # the stretch over the first 32 days fails on the 20th: each of its batches then reads its
    # own day; the stretch after it reads as one
    assert passes[0] == (FIRST, FIRST + timedelta(days=32))
    assert sorted(passes[1:]) == [
        *days(0, 32),
        (FIRST + timedelta(days=32), FIRST + timedelta(days=DAYS)),
    ]
    alone = with_one_bad_day(example_project(tmp_path / "alone", deploy=False))
    backfill(alone, budget=10**9, exit_code=1)
    failed = unpublished(ahead)
    # only 2025-01-20 fails, with the warehouse's error, exactly as when each day is read alone
    assert [(start, state) for start, state, _ in failed] == [
        (int((datetime(2025, 1, 20) - datetime(1970, 1, 1)).total_seconds()), "failed")
    ]
    assert "Conversion Error" in failed[0][2]
    assert failed == unpublished(alone)
    assert recorded(ahead) == recorded(alone)
