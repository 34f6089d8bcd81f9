"""Where a release decision meets history: backdated stamps, rollbacks and pauses of a
backfill in progress, old versions, partitions written ahead of time, a previous version that
cannot run any more, checks against the previous partition."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb

from tests.kit import FORCED, tidegate, tidegate_events

DAILY = Path("models") / "daily_revenue.sql"
MONTHLY = Path("models") / "monthly_revenue.sql"


def cli(project: Path, *args: str, code: int = 0) -> Any:
    result = tidegate(*args, "--project", project)
    assert result.exit_code == code, (args, result.stdout[-1500:], result.stderr)
    return result


def edit(project: Path, path: Path, old: str, new: str) -> None:
    text = (project / path).read_text()
    assert text.count(old) == 1, old
    (project / path).write_text(text.replace(old, new))


def add_max_gross(project: Path) -> None:
    edit(
        project,
        DAILY,
        'net_revenue = "DECIMAL(18, 2) NOT NULL"\n',
        'net_revenue = "DECIMAL(18, 2) NOT NULL"\nmax_gross = "DECIMAL(18, 2)"\n',
    )
    edit(
        project, DAILY, "AS net_revenue\n", "AS net_revenue,\n    max(gross_amount) AS max_gross\n"
    )


def test_the_newest_gate_is_the_newest_recorded_whatever_its_stamp(project: Path) -> None:
    add_max_gross(project)
    cli(project, "build")
    cli(project, "validate", "daily_revenue", "--partitions", "2025-03-01")
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    con.execute("UPDATE orders SET status = 'bogus' WHERE order_id = 1")
    con.close()
    # a later gate, stamped earlier: it failed, and it is the one that counts
    cli(
        project,
        "validate",
        "daily_revenue",
        "--partitions",
        "2025-01-01",
        "--as-of",
        "2024-06-01T00:00:00Z",
        code=1,
    )
    refused = cli(project, "deploy", "daily_revenue", code=3)
    assert "newest gate" in refused.stderr and "failed" in refused.stderr


def test_an_older_version_missing_a_column_readers_use_is_refused(project: Path) -> None:
    add_max_gross(project)
    edit(
        project,
        MONTHLY,
        "CAST(sum(net_revenue) AS DECIMAL(18, 2)) AS net_revenue\n",
        "CAST(sum(net_revenue) AS DECIMAL(18, 2)) AS net_revenue,\n"
        "    CAST(max(max_gross) AS DECIMAL(18, 2)) AS max_gross\n",
    )
    edit(
        project,
        MONTHLY,
        'net_revenue = "DECIMAL(18, 2) NOT NULL"\n',
        'net_revenue = "DECIMAL(18, 2) NOT NULL"\nmax_gross = "DECIMAL(18, 2)"\n',
    )
    cli(project, "build")
    cli(project, "validate", "daily_revenue", "--partitions", "2025-01-01")
    cli(project, "deploy", "daily_revenue")
    cli(project, "deploy", "monthly_revenue", *FORCED)
    # v1 of daily (no max_gross) was built as "new": what counts is what readers read today
    cli(project, "validate", "daily_revenue", "--version", "v1", "--partitions", "2025-01-02")
    refused = cli(project, "deploy", "daily_revenue", "--version", "v1", code=3)
    assert "monthly_revenue (max_gross)" in refused.stderr


def test_a_backfill_does_not_resume_a_paused_or_rolled_back_version(project: Path) -> None:
    add_max_gross(project)
    cli(project, "build")
    cli(project, "validate", "daily_revenue", "--partitions", "2025-01-01")
    cli(project, "deploy", "daily_revenue")
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    con.execute("UPDATE orders SET status = 'bogus' WHERE order_ts::DATE = DATE '2025-03-02'")
    con.close()
    halted = tidegate(
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-03-01..2025-03-03",
        "--json",
        "--project",
        project,
    )
    assert halted.exit_code == 1
    run_id = halted.json()["run_id"]
    cli(project, "pause", "daily_revenue")
    paused = cli(project, "backfill", "resume", run_id, code=3)
    assert "is paused" in paused.stderr
    cli(project, "unpause", "daily_revenue")
    cli(project, "rollback", "daily_revenue", "--reason", "v2 is wrong")
    rolled = cli(project, "backfill", "resume", run_id, code=3)
    assert "rolled back" in rolled.stderr


def test_a_partition_written_ahead_of_time_does_not_stop_the_tick(project: Path) -> None:
    cli(project, "run", "daily_revenue", "--partition", "2025-12-31")
    tick = json.loads(
        cli(project, "run", "daily_revenue", "--as-of", "2025-06-13T03:00:00Z", "--json").stdout
    )
    assert [p["partition"] for p in tick["partitions"]] == ["2025-06-12"]


def test_a_previous_version_that_cannot_run_never_fails_the_confirming_run(
    project: Path,
) -> None:
    cli(project, "run", "daily_revenue", "--partition", "2025-03-08")
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    con.execute("ALTER TABLE orders RENAME COLUMN refund TO refund_amount")
    con.close()
    edit(
        project,
        DAILY,
        "CAST(sum(gross_amount - discount - refund) AS",
        "CAST(sum(gross_amount - discount - refund_amount) AS",
    )
    edit(
        project,
        DAILY,
        'source_expression = "sum(gross_amount - discount - refund)"',
        'source_expression = "sum(gross_amount - discount - refund_amount)"',
    )
    cli(project, "build")
    cli(project, "deploy", "daily_revenue", *FORCED)
    tick = json.loads(
        cli(project, "run", "daily_revenue", "--as-of", "2025-03-10T03:00:00Z", "--json").stdout
    )
    assert tick["status"] == "succeeded"
    assert any("not compared" in n for n in tick["notes"])
    status = json.loads(cli(project, "status", "daily_revenue", "--json").stdout)
    checked = status["models"][0]["deploy"]["correctness"]
    assert checked == {"partition": "2025-03-09", "against": "v1", "agree": None}


def test_a_check_against_the_previous_partition_judges_alike_at_any_concurrency(
    project: Path,
) -> None:
    (project / "models" / "order_rows.sql").write_text(
        '/* tidegate\ngrain = "day"\ntime_column = "d"\nstart = "2025-01-01"\n\n'
        '[columns]\nd = "DATE NOT NULL"\norder_id = "BIGINT NOT NULL"\n\n'
        '[[checks]]\nname = "no_sudden_drop"\ntype = "row_count"\nrelative_to = "previous"\n'
        "min_ratio = 0.5\n*/\n"
        "SELECT CAST(order_ts AS DATE) AS d, order_id FROM orders\n"
        "WHERE order_ts >= $start AND order_ts < $end\n"
    )
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    con.execute(
        "DELETE FROM orders WHERE order_ts::DATE = DATE '2025-04-08' "
        "AND order_id NOT IN (SELECT min(order_id) FROM orders "
        "WHERE order_ts::DATE = DATE '2025-04-08')"
    )
    con.close()
    cli(project, "build")
    cli(project, "deploy", "order_rows")
    events = tidegate_events(
        "backfill",
        "order_rows",
        "--partitions",
        "2025-04-01..2025-04-14",
        "--batch-size",
        "7",
        "--max-concurrency",
        "2",
        "--json",
        "--project",
        project,
    )
    outcomes = {
        e["partition"]: (e["state"], e.get("reason"))
        for e in events.events
        if e["event"] == "partition"
    }
    # 04-08 opens the second batch: it is judged against 04-07 as published (20 rows), not
    # passed for want of a previous partition while the first batch was still in flight
    assert outcomes["2025-04-07"][0] == "published"
    state, reason = outcomes["2025-04-08"]
    assert state == "failed" and "of previous partition's 20" in (reason or ""), outcomes
