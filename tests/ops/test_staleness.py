"""Downstream staleness: replacing a published partition with other content marks every
partition built from the replaced content stale, shows it, tells consumers, and says how to
recompute it; `--cascade` recomputes it in the same operation."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.kit import Hook, cli, result_document, warehouse_execute

JUNE = "2025-06-01..2025-06-30"
LATE_DAY = "2025-06-11"
LATE_ROWS = (
    "UPDATE orders SET gross_amount = gross_amount + 100 "
    "WHERE order_ts >= TIMESTAMP '2025-06-11' AND order_ts < TIMESTAMP '2025-06-12' "
    "AND status = 'completed'"
)


doc = result_document


def june(project: Path) -> str:
    """June of every model; the daily backfill's run id."""
    run = doc(project, "backfill", "daily_revenue", "--partitions", JUNE, "--batch-size", "30")
    cli(project, "backfill", "monthly_revenue", "--partitions", "2025-06")
    cli(project, "backfill", "revenue_report", "--partitions", "2025-06")
    return str(run["run_id"])


def net(project: Path, table: str, where: str = "") -> Decimal:
    con = duckdb.connect(str(project / "warehouse.duckdb"), read_only=True)
    try:
        [(total,)] = con.execute(f"SELECT sum(net_revenue) FROM {table} {where}").fetchall()
    finally:
        con.close()
    return Decimal(total)


def month_agrees_with_days(project: Path) -> bool:
    days = net(project, "daily_revenue", "WHERE order_date < DATE '2025-07-01'")
    return net(project, "monthly_revenue") == days


def marks(project: Path, model: str, partition: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = doc(project, "show", "partition", model, partition)["taints"]
    return found


def counts(project: Path) -> dict[str, dict[str, int]]:
    return {m["model"]: m["partitions"] for m in doc(project, "status")["models"]}


def register(project: Path, url: str) -> None:
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text()
        + f'\n[[notify]]\nname = "finance_hook"\nkind = "http"\nurl = "{url}"\n'
        + '\n[[consumers]]\nname = "finance"\nmodel = "monthly_revenue"\n'
        + 'notify = "finance_hook"\n'
    )


def test_a_rerun_that_changes_a_day_leaves_its_month_and_report_stale_until_recovered(
    project: Path, hook: Hook
) -> None:
    hook.up.set()
    register(project, hook.url)
    run_id = june(project)
    assert month_agrees_with_days(project)
    warehouse_execute(project, LATE_ROWS)
    hook.received.clear()

    rerun = cli(project, "rerun", run_id, "--partitions", LATE_DAY, "--approve", "late correction")
    # the month still holds the old total: it must not be shown green
    assert not month_agrees_with_days(project)
    assert "monthly_revenue 2025-06" in rerun.stdout
    assert "tidegate recover monthly_revenue --partitions 2025-06" in rerun.stdout
    status = counts(project)
    assert status["monthly_revenue"]["upstream_changed"] == 1
    assert status["revenue_report"]["upstream_changed"] == 1
    assert status["daily_revenue"]["upstream_changed"] == 0
    [month] = marks(project, "monthly_revenue", "2025-06")
    assert (month["kind"], month["depth"], month["via"]) == (
        "stale",
        1,
        f"daily_revenue {LATE_DAY}",
    )
    assert doc(project, "show", "partition", "monthly_revenue", "2025-06")["state"] == (
        "upstream_changed"
    )
    [report] = marks(project, "revenue_report", "2025-06")
    assert (report["kind"], report["depth"]) == ("stale", 2)
    [event] = [
        e for e in doc(project, "history", "monthly_revenue")["events"] if e["kind"] == "stale"
    ]
    assert event["reason"].startswith(f"upstream changed: daily_revenue {LATE_DAY}")
    shown = cli(project, "show", "partition", "monthly_revenue", "2025-06").stdout
    assert "tidegate recover monthly_revenue --partitions 2025-06" in shown
    told = [n for n in hook.received if n.get("kind") == "changed"]
    assert [(n["model"], n["partitions"]) for n in told] == [("monthly_revenue", ["2025-06"])]

    # what the rerun printed recomputes both, upstream first
    cli(project, "recover", "monthly_revenue", "--partitions", "2025-06")
    assert month_agrees_with_days(project)
    status = counts(project)
    assert status["monthly_revenue"]["upstream_changed"] == 0
    assert status["revenue_report"]["upstream_changed"] == 0
    assert marks(project, "revenue_report", "2025-06") == []
    assert [(n["kind"], n["model"]) for n in hook.received if n.get("kind") == "reread"] == [
        ("reread", "monthly_revenue")
    ]


def test_a_replacement_with_the_same_content_leaves_downstream_green(project: Path) -> None:
    run_id = june(project)
    cli(project, "rerun", run_id, "--partitions", LATE_DAY, "--approve", "same rows again")
    status = counts(project)
    assert status["monthly_revenue"]["upstream_changed"] == 0
    assert status["revenue_report"]["upstream_changed"] == 0
    assert doc(project, "show", "partition", "monthly_revenue", "2025-06")["state"] == "published"


def test_a_backfill_that_changes_days_marks_the_month_it_feeds_and_no_other(
    project: Path,
) -> None:
    june(project)
    cli(project, "backfill", "daily_revenue", "--partitions", "2025-05-01..2025-05-31")
    cli(project, "backfill", "monthly_revenue", "--partitions", "2025-05")
    warehouse_execute(project, LATE_ROWS)
    done = cli(project, "backfill", "daily_revenue", "--partitions", "2025-06-10..2025-06-12")
    assert "tidegate recover monthly_revenue --partitions 2025-06" in done.stdout
    assert marks(project, "monthly_revenue", "2025-05") == []
    assert [m["kind"] for m in marks(project, "monthly_revenue", "2025-06")] == ["stale"]


@pytest.mark.parametrize("command", ["rerun", "backfill"])
def test_cascade_recomputes_what_went_stale_in_the_same_operation(
    project: Path, command: str
) -> None:
    run_id = june(project)
    warehouse_execute(project, LATE_ROWS)
    if command == "rerun":
        args = ["rerun", run_id, "--partitions", LATE_DAY, "--approve", "late correction"]
    else:
        args = ["backfill", "daily_revenue", "--partitions", LATE_DAY]
    done = doc(project, *args, "--cascade")
    assert month_agrees_with_days(project)
    status = counts(project)
    assert status["monthly_revenue"]["upstream_changed"] == 0
    assert status["revenue_report"]["upstream_changed"] == 0
    assert [c["model"] for c in done["cascade"]["steps"]] == ["monthly_revenue", "revenue_report"]
    # the recoveries the cascade ran are in each model's history, as a `recover` is
    for model in ("monthly_revenue", "revenue_report"):
        history = doc(project, "history", model)["events"]
        recovered = [e["detail"] for e in history if e["kind"] == "recover"]
        assert [(r["partitions"], r["status"]) for r in recovered] == [(["2025-06"], "succeeded")]


def test_a_cascade_over_partitions_a_consumer_read_needs_an_approval(
    project: Path, hook: Hook
) -> None:
    hook.up.set()
    register(project, hook.url)
    june(project)  # the month's `published` notice is delivered: finance has read 2025-06
    warehouse_execute(project, LATE_ROWS)
    before = counts(project)
    refused = cli(
        project, "backfill", "daily_revenue", "--partitions", LATE_DAY, "--cascade", code=3
    )
    assert "finance: monthly_revenue 2025-06" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert counts(project) == before  # nothing ran
    done = doc(
        project,
        "backfill",
        "daily_revenue",
        "--partitions",
        LATE_DAY,
        "--cascade",
        "--approve",
        "late rows of June 11",
    )
    assert done["cascade"]["status"] == "succeeded"
    assert month_agrees_with_days(project)


def test_approve_without_cascade_is_a_usage_error(project: Path) -> None:
    refused = cli(
        project, "backfill", "daily_revenue", "--partitions", LATE_DAY, "--approve", "x", code=2
    )
    assert "--approve goes with --cascade" in refused.stderr
