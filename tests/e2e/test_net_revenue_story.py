"""Story 1 of docs/design.md §2 through the command line, with the ways it must not go wrong.

v1 of daily_revenue (no net_revenue) is active with 365 published partitions; v2 adds the column
(additive), passes its gate, and the diff shows only the new column; it is deployed, a new day of
orders arrives and the scheduled run publishes it with v2; status confirms the deploy; a
stale-only backfill moves the history to v2, reconciled per partition. A bad v3 fails its gate
and is never seen by readers; a breaking change is refused with its downstream models named.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from tests.kit import (
    assert_exactly_once,
    example_project,
    oracle_daily_revenue,
    published_daily_revenue,
    tidegate,
    tidegate_events,
    warehouse_rows,
)

DAILY = Path("models") / "daily_revenue.sql"
V1 = resources.files("tidegate") / "examples" / "orders" / "story" / "daily_revenue_v1.sql"
YEAR = "2025-01-01..2025-12-31"
NET = "CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue"
# v3: net above gross on days with refunds counted backwards
BAD_NET = "CAST(sum(gross_amount - discount + refund) AS DECIMAL(18, 2)) AS net_revenue"


def cli(project: Path, *args: str, code: int = 0) -> Any:
    result = tidegate(*args, "--project", project, "--json")
    assert result.exit_code == code, (args, result.stdout[-2000:], result.stderr)
    return result.json() if result.stdout.strip() else None


def built(project: Path, model: str = "daily_revenue") -> dict[str, Any]:
    document = cli(project, "build")
    return next(m for m in document["models"] if m["model"] == model)  # type: ignore[no-any-return]


def append_new_year_day(project: Path) -> int:
    """Orders of 2026-01-01 arrive: last year's final day again, one year later, new ids."""
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        con.execute(
            "INSERT INTO orders SELECT order_id + 1000000000, order_ts + INTERVAL 1 DAY, "
            "customer_id, status, gross_amount, discount, refund FROM orders "
            "WHERE order_ts >= TIMESTAMP '2025-12-31'"
        )
        [(count,)] = con.execute(
            "SELECT count(*) FROM orders WHERE order_ts >= TIMESTAMP '2026-01-01'"
        ).fetchall()
    finally:
        con.close()
    return int(count)


def test_net_revenue_reaches_readers_only_through_a_passed_gate(tmp_path: Path) -> None:
    project = example_project(tmp_path / "proj", deploy=False)
    with_net = (project / DAILY).read_text()
    (project / DAILY).write_text(V1.read_text())
    assert built(project)["seq"] == 1
    cli(project, "deploy", "daily_revenue")
    backfilled = tidegate(
        "backfill",
        "daily_revenue",
        "--partitions",
        YEAR,
        "--batch-size",
        "30",
        "--project",
        project,
    )
    assert backfilled.exit_code == 0, backfilled.stderr
    assert warehouse_rows(project, "SELECT count(DISTINCT order_date) FROM daily_revenue") == [
        (365,)
    ]

    # v2 adds net_revenue: additive, validated on a sample, the diff shows only the new column
    (project / DAILY).write_text(with_net)
    v2 = built(project)
    assert (v2["seq"], v2["change"]) == (2, "additive")
    gate = cli(project, "validate", "daily_revenue", "--sample", "5")
    assert gate["passed"] is True
    sampled = [p["partition"] for p in gate["partitions"]]
    assert sampled[0] == "2025-01-01" and sampled[-1] == "2025-12-31" and len(sampled) == 5
    assert gate["diff"]["columns"] == {"only_left": [], "only_right": ["net_revenue"]}
    assert all(p["agree"] is True for p in gate["diff"]["partitions"])
    for label in sampled:
        compared = cli(
            project,
            "diff",
            "daily_revenue",
            "--left",
            "v1",
            "--right",
            "v2",
            "--partitions",
            label,
        )
        assert compared["agree"] is True
        assert compared["columns"]["only_right"] == ["net_revenue"]
        assert compared["summary"]["keys_changed"] == 0

    deployed = cli(project, "deploy", "daily_revenue")
    assert (deployed["seq"], deployed["forced"]) == (2, False)
    status = cli(project, "status", "daily_revenue")["models"][0]
    assert status["deploy"]["state"] == "pending"

    # a new day arrives; the scheduled run publishes it with v2 and confirms the deploy
    assert append_new_year_day(project) > 0
    tick = cli(project, "run", "daily_revenue", "--as-of", "2026-01-02T03:00:00Z")
    assert [(o["partition"], o["state"]) for o in tick["partitions"]] == [
        ("2026-01-01", "published")
    ]
    status = cli(project, "status", "daily_revenue")["models"][0]
    # and the post-deploy check: v1 computed that day into its shadow table, compared with v2
    assert status["deploy"] == {
        "version": "v2",
        "state": "confirmed",
        "confirmed_by_run": tick["run_id"],
        "correctness": {"partition": "2026-01-01", "against": "v1", "agree": True},
    }
    assert any("first partition 2026-01-01 against v1: the same" in n for n in tick["notes"])
    assert (status["partitions"]["published"], status["partitions"]["stale"]) == (1, 365)

    # the history v2 has not written yet: stale partitions only, every one reconciled
    plan = cli(
        project,
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-01-01..2026-01-01",
        "--stale-only",
        "--dry-run",
    )
    assert plan["partitions"] == 365
    events = tidegate_events(
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-01-01..2026-01-01",
        "--stale-only",
        "--batch-size",
        "30",
        "--max-concurrency",
        "2",
        "--json",
        "--project",
        project,
    )
    assert events.exit_code == 0, events.stderr
    end = [e for e in events.events if e["event"] == "end"]
    assert len(end) == 1 and end[0]["published"] == 365
    assert events.json()["published"] == 365
    status = cli(project, "status", "daily_revenue")["models"][0]
    assert (status["partitions"]["published"], status["partitions"]["stale"]) == (366, 0)
    assert_exactly_once(published_daily_revenue(project), oracle_daily_revenue(project))
    unreconciled = [
        label
        for label in ("2025-01-01", "2025-06-30", "2025-12-31", "2026-01-01")
        if not all(
            r["passed"]
            for r in cli(project, "show", "partition", "daily_revenue", label)["published"][
                "reconciliations"
            ]
        )
    ]
    assert unreconciled == []

    # a bad v3 fails its gate and is never visible to readers
    before = published_daily_revenue(project)
    (project / DAILY).write_text(with_net.replace(NET, BAD_NET))
    assert built(project)["seq"] == 3
    failed = cli(project, "validate", "daily_revenue", "--sample", "5", code=1)
    assert failed["passed"] is False
    assert any(
        c["name"] == "net_not_above_gross" and not c["passed"]
        for p in failed["partitions"]
        for c in p["checks"]
    )
    refused = tidegate("deploy", "daily_revenue", "--project", project)
    assert refused.exit_code == 3 and "failed" in refused.stderr
    assert published_daily_revenue(project) == before
    assert cli(project, "status", "daily_revenue")["models"][0]["active_version"]["seq"] == 2


def test_a_breaking_change_is_refused_naming_the_downstream_columns_it_breaks(
    project: Path,
) -> None:
    text = (project / DAILY).read_text()
    dropped = text.replace('gross_revenue = "DECIMAL(18, 2) NOT NULL"\n', "").replace(
        "CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross_revenue,\n", ""
    )
    assert dropped != text
    # the model's own check and reconciliation read the column too: they go with it
    (project / DAILY).write_text(
        dropped.replace(
            'target_expression = "sum(gross_revenue)"', 'target_expression = "sum(order_count)"'
        ).replace('expression = "net_revenue <= gross_revenue"', 'expression = "order_count > 0"')
    )
    assert built(project)["change"] == "breaking"
    refused = tidegate("deploy", "daily_revenue", "--project", project)
    assert refused.exit_code == 3
    [line] = refused.stderr.strip().splitlines()
    # exactly the readers of the dropped column: monthly_revenue reads it, the report does not
    assert "breaking" in line and "monthly_revenue (gross_revenue)" in line
    assert "revenue_report" not in line
