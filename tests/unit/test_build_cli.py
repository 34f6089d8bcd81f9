"""`tidegate build` through the CLI: reformatting is no new version; a real change is, downstream
included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.kit import EXAMPLE_MODELS, tidegate

REFORMATTED_BODY = """
-- the same query, other formatting: comments, case and whitespace only
select
  cast(order_ts as date) as order_date,   status,
  COUNT(*) as order_count, /* gross */ cast(SUM(gross_amount) as decimal(18,2)) as gross_revenue,
        cast(SUM(gross_amount - discount - refund)
             as decimal(18,   2)) as net_revenue
from orders
where order_ts >= $start and order_ts < $end   -- the partition
group by cast(order_ts as date),
         status
"""


def rewrite_body(project: Path, model: str, body: str) -> None:
    path = project / "models" / f"{model}.sql"
    text = path.read_text()
    header_end = text.index("*/") + 2
    path.write_text(text[:header_end] + "\n" + body)


def build(project: Path) -> dict[str, dict[str, Any]]:
    result = tidegate("build", "--project", project, "--json")
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert document["schema"] == "tidegate.build/v1"
    return {m["model"]: m for m in document["models"]}


def test_reformatting_a_model_changes_nothing(project: Path) -> None:
    before = build(project)
    assert {m: before[m]["change"] for m in EXAMPLE_MODELS} == dict.fromkeys(
        EXAMPLE_MODELS, "unchanged"
    )
    rewrite_body(project, "daily_revenue", REFORMATTED_BODY)
    after = build(project)
    assert {m: after[m]["change"] for m in EXAMPLE_MODELS} == dict.fromkeys(
        EXAMPLE_MODELS, "unchanged"
    )
    for model in EXAMPLE_MODELS:
        assert after[model]["created"] is False
        assert after[model]["version_id"] == before[model]["version_id"]
        assert after[model]["seq"] == 1


def test_a_real_change_makes_new_versions_downstream(project: Path) -> None:
    before = build(project)
    changed = REFORMATTED_BODY.replace(
        "SUM(gross_amount - discount - refund)", "SUM(gross_amount - discount)"
    )
    assert changed != REFORMATTED_BODY
    rewrite_body(project, "daily_revenue", changed)
    after = build(project)

    daily = after["daily_revenue"]
    assert daily["change"] == "modified"
    assert daily["created"] is True
    assert daily["seq"] == 2
    assert daily["version_id"] != before["daily_revenue"]["version_id"]
    assert daily["active_version"] == before["daily_revenue"]["version_id"]
    for model in ("monthly_revenue", "revenue_report"):
        # their SQL did not change, but what they read did
        assert after[model]["created"] is True, model
        assert after[model]["seq"] == 2, model
        assert after[model]["version_id"] != before[model]["version_id"], model
        assert after[model]["change"] == "modified", model

    again = build(project)
    assert all(m["created"] is False for m in again.values())
    assert {m: again[m]["version_id"] for m in again} == {m: after[m]["version_id"] for m in after}
