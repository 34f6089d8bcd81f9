"""The demo's daily_revenue equals an independent GROUP BY over orders, cent-exact."""

from __future__ import annotations

import json
from pathlib import Path

from tests.kit import (
    assert_exactly_once,
    assert_no_staging,
    oracle_daily_revenue,
    published_daily_revenue,
    tidegate,
    warehouse_rows,
)
from tests.notify.openlineage_kit import events, validate


def test_demo_matches_an_independent_group_by(tmp_path: Path) -> None:
    kept = tmp_path / "demo"
    result = tidegate("demo", "--rows-per-day", "200", "--keep", kept, "--json")
    assert result.exit_code == 0, result.stderr
    first, tick, stale, *_, failed, rerun = result.json()["runs"]

    oracle = oracle_daily_revenue(kept)
    assert len({row[0] for row in oracle}) == 365
    assert_exactly_once(published_daily_revenue(kept), oracle)
    assert_no_staging(kept)

    status = tidegate("status", "--project", kept, "--json").json()
    counts = {m["model"]: m["partitions"] for m in status["models"]}
    assert counts["daily_revenue"]["published"] == 365
    assert counts["monthly_revenue"]["published"] == 12
    assert counts["revenue_report"]["published"] == 12
    # green means right: nothing is marked, and the warehouse holds what the ledger records
    # (the demo backdates its runs with --as-of: markers are ordered by attempt, not by time)
    marked = ("tainted", "upstream_changed", "diverged", "missing")
    assert [(m, k) for m, c in counts.items() for k in marked if c[k]] == []
    verified = tidegate("verify", "--checksums", "--project", kept)
    assert verified.exit_code == 0, verified.stdout + verified.stderr

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

    # story 1: v1 without net_revenue, then v2 with it validated, deployed, confirmed, and the
    # history it had not written backfilled (stale partitions only)
    (daily_status,) = [m for m in status["models"] if m["model"] == "daily_revenue"]
    assert daily_status["active_version"]["seq"] == 2
    assert daily_status["deploy"]["state"] == "confirmed"
    assert daily_status["partitions"]["stale"] == 0
    history = tidegate("history", "daily_revenue", "--project", kept, "--json").json()
    story = [
        (e["kind"], e["detail"].get("seq"), e["detail"].get("passed")) for e in history["events"]
    ]
    assert story == [
        ("build", 1, None),
        ("deploy", 1, None),
        ("build", 2, None),
        ("gate", None, True),
        ("deploy", 2, None),
        ("correctness", None, None),
        ("approval", None, None),  # story 2's rerun
    ]
    assert history["events"][5]["detail"]["agree"] is True
    gate_id = history["events"][3]["detail"]["gate_id"]
    assert history["events"][4]["detail"]["gate"] == f"gate {gate_id} passed"
    shown = {
        run_id: tidegate("show", "run", run_id, "--project", kept, "--json").json()
        for run_id in (first, tick, stale)
    }
    published = {
        run_id: sorted(a["partition"] for a in doc["attempts"] if a["state"] == "published")
        for run_id, doc in shown.items()
    }
    assert len(published[first]) == 365 and published[tick] == ["2025-12-31"]
    assert shown[stale]["plan"]["stale_only"] is True
    assert len(published[stale]) == 364 and "2025-12-31" not in published[stale]

    # story 2: the third partition failed; it still held story 1's publish, which the monthly
    # model and the consumer had read, so the rerun needed (and recorded) an approval before it
    # published that day alone; the consumer was told
    broken = tidegate("show", "run", failed, "--project", kept, "--json").json()
    assert [(a["partition"], a["state"]) for a in broken["attempts"]][2] == (
        "2025-06-03",
        "failed",
    )
    redone = tidegate("show", "run", rerun, "--project", kept, "--json").json()
    assert redone["kind"] == "rerun" and redone["plan"]["rerun_of"] == failed
    assert [(a["partition"], a["state"]) for a in redone["attempts"]] == [
        ("2025-06-03", "published")
    ]
    verdicts = {j["partition"]: j["verdict"] for j in redone["plan"]["judgment"]}
    assert verdicts == {
        "2025-06-01": "untouched",
        "2025-06-02": "untouched",
        "2025-06-03": "needs approval",
        "2025-06-04": "untouched",
        "2025-06-05": "untouched",
    }
    [third] = [j for j in redone["plan"]["judgment"] if j["partition"] == "2025-06-03"]
    assert third["read_by"] == ["finance", "monthly_revenue 2025-06"]
    assert "the load is repaired" in redone["plan"]["approval"]["reason"]
    notices = [json.loads(line) for line in (kept / "notices.jsonl").read_text().splitlines()]
    assert notices[-1]["partitions"] == ["2025-06-03"] and notices[-1]["run_id"] == rerun

    # every OpenLineage event of the demo's runs is valid; each run began and ended
    lineage = events(kept / "lineage.jsonl")
    for event in lineage:
        validate(event)
    began = {e["run"]["runId"] for e in lineage if e["eventType"] == "START"}
    ended = {e["run"]["runId"] for e in lineage if e["eventType"] in ("COMPLETE", "FAIL")}
    assert began == ended and len(began) >= len(result.json()["runs"])
    assert {e["eventType"] for e in lineage} == {"START", "COMPLETE", "FAIL"}


def test_demo_default_scale_leaves_nothing_behind() -> None:
    result = tidegate("demo", "--json")
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert document["orders_rows"] == 365 * 1000
    assert document["kept"] is None
    daily = next(m for m in document["status"]["models"] if m["model"] == "daily_revenue")
    assert daily["partitions"]["published"] == 365
