"""What a check or reconciliation expression, or a model's SQL, gets wrong is said at build in
the user's terms (the column it reads, where the SQL stops parsing), and a source column the
warehouse lacks is named with the model and version that read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import FORCED, Result, tidegate

DAILY = Path("models") / "daily_revenue.sql"


def edit(project: Path, old: str, new: str) -> None:
    path = project / DAILY
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def with_check(project: Path, expression: str) -> None:
    edit(
        project,
        'expression = "net_revenue <= gross_revenue"',
        f"expression = {expression!r}".replace("'", '"'),
    )


def one_error(result: Result) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def build(project: Path) -> Result:
    return tidegate("build", "--project", project)


def test_an_expression_check_reading_a_column_the_model_lacks_is_refused_at_build(
    project: Path,
) -> None:
    with_check(project, "net_revenue <= gros_revenue")
    result = build(project)
    assert result.exit_code == 2, result
    line = one_error(result)
    assert "checks[2]: expression reads column 'gros_revenue'" in line, line
    assert "gross_revenue" in line, "the model's columns are listed"


def test_a_reconciliation_target_reading_a_column_the_model_lacks_is_refused_at_build(
    project: Path,
) -> None:
    edit(project, 'target_expression = "sum(gross_revenue)"', 'target_expression = "sum(gros)"')
    result = build(project)
    assert result.exit_code == 2, result
    line = one_error(result)
    assert "reconciliations[1]: target_expression reads column 'gros'" in line, line


def test_a_source_expression_is_not_checked_against_the_model_s_columns(project: Path) -> None:
    """Its columns are the source's, known only in the warehouse."""
    edit(project, 'source_expression = "sum(gross_amount)"', 'source_expression = "sum(discount)"')
    assert build(project).exit_code == 0


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        ("net_revenue <= ", "something is missing after '<='"),
        ("net_revenue > 0 AND", "something is missing after 'AND'"),
        ("(net_revenue > 0", "a parenthesis is not closed"),
    ],
)
def test_an_expression_that_does_not_parse_says_where_in_the_user_s_terms(
    project: Path, expression: str, said: str
) -> None:
    with_check(project, expression)
    result = build(project)
    assert result.exit_code == 2, result
    line = one_error(result)
    assert "<class" not in line and "sqlglot" not in line, line
    assert f"checks[2]: expression is not a valid SQL predicate: {said}" in line, line


def test_model_sql_that_does_not_parse_names_no_parser_class(project: Path) -> None:
    edit(project, "GROUP BY", "AND GROUP BY")
    result = build(project)
    assert result.exit_code == 2, result
    line = one_error(result)
    assert "<class" not in line and "sqlglot" not in line, line
    assert "SQL does not parse" in line, line


def test_a_source_column_the_warehouse_lacks_is_named_with_the_model_and_version(
    project: Path,
) -> None:
    edit(project, "sum(gross_amount) AS DECIMAL", "sum(gross_amt) AS DECIMAL")
    built = tidegate("build", "--json", "--project", project)
    assert built.exit_code == 0, built.stderr
    seq = next(m for m in built.json()["models"] if m["model"] == "daily_revenue")["seq"]
    deployed = tidegate("deploy", "daily_revenue", *FORCED, "--project", project)
    assert deployed.exit_code == 0, deployed.stderr
    result = tidegate(
        "backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-01", "--project", project
    )
    assert result.exit_code == 3, result
    said = f"daily_revenue v{seq}: source orders has no column gross_amt"
    assert said in one_error(result)
    validated = tidegate(
        "validate", "daily_revenue", "--partitions", "2025-01-01..2025-01-01", "--project", project
    )
    assert validated.exit_code == 1, validated
    assert said in validated.stdout, validated.stdout
