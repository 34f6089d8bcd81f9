"""Nothing is never proof: a model does not publish on empty upstream partitions unless they
were allowed to be empty (a min_rows of 0), and a reconciliation of no rows against no rows
does not pass by itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.kit import FORCED, tidegate

# no orders are generated after 2025: every day of this month is empty
EMPTY_MONTH = "2026-01"
EMPTY_DAYS = "2026-01-01..2026-01-31"
DAILY = Path("models") / "daily_revenue.sql"


def cli(project: Path, *args: str, code: int = 0) -> Any:
    result = tidegate(*args, "--project", project)
    assert result.exit_code == code, (args, result.stdout[-2000:], result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def orders_min_rows(project: Path, rows: int) -> None:
    config = project / "tidegate.toml"
    text = config.read_text()
    if "min_rows" not in text:
        text = text.replace('time_column = "order_ts"', 'time_column = "order_ts"\nmin_rows = 1')
    config.write_text(
        text.replace("min_rows = 1", f"min_rows = {rows}").replace(
            "min_rows = 0", f"min_rows = {rows}"
        )
    )


def empty_days_published(project: Path) -> None:
    """Every day of the empty month published with 0 rows, as a source allowing empty days
    lets daily_revenue do."""
    orders_min_rows(project, 0)
    cli(project, "backfill", "daily_revenue", "--partitions", EMPTY_DAYS, "--batch-size", "31")
    orders_min_rows(project, 1)


def shown_month(project: Path) -> Any:
    found = cli(project, "show", "partition", "monthly_revenue", EMPTY_MONTH, "--json").json()
    return found["published"]


def test_a_month_is_not_published_on_empty_days_that_were_not_allowed_to_be_empty(
    project: Path,
) -> None:
    empty_days_published(project)

    refused = cli(project, "run", "monthly_revenue", "--partition", EMPTY_MONTH, "--json", code=1)

    [outcome] = refused.json()["partitions"]
    assert (outcome["state"], outcome["reason"]) == (
        "skipped",
        "upstream daily_revenue 2026-01-01 holds 0 row(s) (at least 1 expected, its min_rows) "
        "and 30 more",
    )
    assert shown_month(project) is None


def test_a_model_allowed_to_be_empty_is_read_empty_and_reconciles(project: Path) -> None:
    empty_days_published(project)
    path = project / DAILY
    path.write_text(path.read_text().replace("/* tidegate\n", "/* tidegate\nmin_rows = 0\n", 1))
    built = cli(project, "build", "--json").json()
    version = next(m for m in built["models"] if m["model"] == "daily_revenue")["version_id"]
    cli(project, "deploy", "daily_revenue", "--version", version, *FORCED)

    cli(project, "run", "monthly_revenue", "--partition", EMPTY_MONTH)

    published = shown_month(project)
    assert published is not None and published["rows"] == 0
