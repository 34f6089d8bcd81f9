"""A model is one SELECT that reads: SQL that would write anything — a statement of its own, a
second statement, or a write hidden inside the SELECT (a data-modifying CTE, which PostgreSQL
runs) — is refused at build with exit 2 and one line, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import state_dump, tidegate, warehouse_dump

COLUMNS = (
    "CAST(order_ts AS DATE) AS order_date, status, count(*) AS order_count, "
    "CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross_revenue, "
    "CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue"
)
WINDOW = "WHERE order_ts >= $start AND order_ts < $end GROUP BY 1, 2"
WRITES = {
    "delete": "DELETE FROM orders",
    "insert": "INSERT INTO orders SELECT * FROM orders",
    "update": "UPDATE orders SET status = 'x'",
    "create": "CREATE TABLE stolen AS SELECT * FROM orders",
    "drop after a select": f"SELECT {COLUMNS} FROM orders {WINDOW}; DROP TABLE orders",
    "attach": "ATTACH 'elsewhere.duckdb' AS elsewhere",
    "copy": "COPY orders TO 'orders.csv'",
    "pragma": "PRAGMA enable_profiling",
    "delete in a CTE": (
        f"WITH gone AS (DELETE FROM orders RETURNING *) SELECT {COLUMNS} FROM gone {WINDOW}"
    ),
    "update in a CTE": (
        "WITH gone AS (UPDATE orders SET refund = 0 RETURNING *) "
        f"SELECT {COLUMNS} FROM gone {WINDOW}"
    ),
    "insert in a nested CTE": (
        "WITH outer_cte AS (WITH inner_cte AS (INSERT INTO orders SELECT * FROM orders "
        f"RETURNING *) SELECT * FROM inner_cte) SELECT {COLUMNS} FROM outer_cte {WINDOW}"
    ),
}


def refused_at_build(project: Path, sql: str) -> None:
    """daily_revenue's SELECT replaced by `sql`: `build` refuses it in one line naming the
    file, exit 2, and writes nothing."""
    model = project / "models" / "daily_revenue.sql"
    text = model.read_text()
    model.write_text(text[: text.index("*/") + 2] + "\n" + sql + "\n")
    before = (state_dump(project), warehouse_dump(project))
    built = tidegate("build", "--project", project)
    assert built.exit_code == 2, built
    [line] = built.stderr.splitlines()
    assert line.startswith("error: models/daily_revenue.sql:"), line
    assert (state_dump(project), warehouse_dump(project)) == before


@pytest.mark.parametrize("sql", list(WRITES.values()), ids=list(WRITES))
def test_sql_that_writes_is_refused_at_build(sql: str, project: Path) -> None:
    refused_at_build(project, sql)


READS = {
    "the commit markers": f"SELECT {COLUMNS} FROM orders, _tidegate.commit_markers {WINDOW}",
    "the staging schema": f"SELECT {COLUMNS} FROM orders, _tidegate_staging.x {WINDOW}",
    "its own output": "SELECT * FROM daily_revenue",
}


@pytest.mark.parametrize("sql", list(READS.values()), ids=list(READS))
def test_a_model_reading_what_tidegate_writes_is_refused_at_build(sql: str, project: Path) -> None:
    """tidegate's own tables, and the table the model writes, are not sources."""
    refused_at_build(project, sql)
