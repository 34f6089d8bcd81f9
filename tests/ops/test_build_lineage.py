"""Build with column-level lineage: downstream versions follow only the columns they read."""

from __future__ import annotations

from pathlib import Path

from tests.kit import tidegate

DAILY = Path("models") / "daily_revenue.sql"


def versions(project: Path) -> dict[str, tuple[int, bool]]:
    built = tidegate("build", "--project", project, "--json")
    assert built.exit_code == 0, built.stderr
    return {m["model"]: (m["seq"], m["created"]) for m in built.json()["models"]}


def edit(project: Path, old: str, new: str) -> None:
    text = (project / DAILY).read_text()
    assert text.count(old) == 1, old
    (project / DAILY).write_text(text.replace(old, new))


def test_a_column_nobody_reads_leaves_downstream_versions_alone(project: Path) -> None:
    edit(
        project,
        'net_revenue = "DECIMAL(18, 2) NOT NULL"\n',
        'net_revenue = "DECIMAL(18, 2) NOT NULL"\nmax_gross = "DECIMAL(18, 2)"\n',
    )
    edit(project, "AS net_revenue\n", "AS net_revenue,\n    max(gross_amount) AS max_gross\n")
    assert versions(project) == {
        "daily_revenue": (2, True),
        "monthly_revenue": (1, False),
        "revenue_report": (1, False),
    }


def test_a_change_to_a_column_downstream_reads_makes_new_downstream_versions(
    project: Path,
) -> None:
    edit(
        project,
        "CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue",
        "CAST(sum(gross_amount - discount) AS DECIMAL(18, 2)) AS net_revenue",
    )
    assert versions(project) == {
        "daily_revenue": (2, True),
        "monthly_revenue": (2, True),
        "revenue_report": (2, True),
    }


def test_a_changed_check_upstream_is_no_new_downstream_version(project: Path) -> None:
    edit(
        project,
        'expression = "net_revenue <= gross_revenue"',
        'expression = "net_revenue < gross_revenue + 1"',
    )
    assert versions(project) == {
        "daily_revenue": (2, True),
        "monthly_revenue": (1, False),
        "revenue_report": (1, False),
    }
