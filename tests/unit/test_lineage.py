"""Column-level lineage: what a model reads upstream, and what its columns are made of."""

from __future__ import annotations

from tidegate.sql.lineage import column_definitions, columns_read
from tidegate.sql.model_sql import parse_query

DAILY = {
    "order_date": "DATE",
    "status": "VARCHAR",
    "order_count": "BIGINT",
    "gross_revenue": "DECIMAL(18, 2)",
    "net_revenue": "DECIMAL(18, 2)",
}


def test_the_columns_read_anywhere_in_the_query_are_found() -> None:
    query = parse_query(
        "SELECT date_trunc('month', order_date) AS month, sum(net_revenue) AS net "
        "FROM daily_revenue WHERE status <> 'cancelled' AND order_date >= $start "
        "GROUP BY 1"
    )
    assert columns_read(query, {"daily_revenue": DAILY}) == {
        "daily_revenue": {"order_date", "net_revenue", "status"}
    }


def test_aliases_and_joins_resolve_to_their_tables() -> None:
    query = parse_query(
        "SELECT d.order_date, o.region FROM daily_revenue AS d "
        "JOIN other AS o ON o.day = d.order_date WHERE d.order_count > 0"
    )
    tables = {"daily_revenue": DAILY, "other": {"day": "DATE", "region": "VARCHAR"}}
    assert columns_read(query, tables) == {
        "daily_revenue": {"order_date", "order_count"},
        "other": {"day", "region"},
    }


def test_a_star_reads_every_column_and_an_untraceable_query_reads_everything() -> None:
    star = parse_query("SELECT * FROM daily_revenue")
    assert columns_read(star, {"daily_revenue": DAILY}) == {"daily_revenue": set(DAILY)}
    unknown = parse_query("SELECT no_such_column FROM daily_revenue")
    assert columns_read(unknown, {"daily_revenue": DAILY}) == {"daily_revenue": set(DAILY)}
    assert columns_read(parse_query("SELECT 1 AS x FROM elsewhere"), {"daily_revenue": DAILY}) == {}


def test_a_column_definition_changes_only_with_what_it_is_made_of() -> None:
    base = "SELECT a, sum(b) AS total, max(c) AS top FROM t WHERE d > 0 GROUP BY a"
    defs = column_definitions(parse_query(base), ["a", "total", "top"])
    other_top = column_definitions(
        parse_query(base.replace("max(c)", "min(c)")), ["a", "total", "top"]
    )
    assert defs["total"] == other_top["total"] and defs["a"] == other_top["a"]
    assert defs["top"] != other_top["top"]
    # what decides the rows changes every column
    filtered = column_definitions(parse_query(base.replace("d > 0", "d > 1")), ["a", "total"])
    assert filtered["a"] != defs["a"] and filtered["total"] != defs["total"]
    # formatting does not count
    spaced = column_definitions(parse_query(base.replace(" ", "  ").lower()), ["total"])
    assert spaced["total"] == defs["total"]


def test_comments_and_case_do_not_change_a_definition() -> None:
    plain = column_definitions(parse_query("SELECT sum(b) AS total FROM t"), ["total"])
    noisy = column_definitions(
        parse_query("select /* the total */ SUM(B) as TOTAL from T -- end"), ["total"]
    )
    assert plain == noisy


def test_when_the_select_list_decides_the_rows_every_column_depends_on_all_of_it() -> None:
    for grouped in (
        "SELECT a, b % 2 AS odd, sum(c) AS total FROM t GROUP BY ALL",
        "SELECT a, b % 2 AS odd, sum(c) AS total FROM t GROUP BY 1, 2",
        "SELECT DISTINCT a, b % 2 AS odd, c AS total FROM t",
        "SELECT a, b % 2 AS odd, sum(c) AS total FROM t GROUP BY a, odd",
    ):
        defs = column_definitions(parse_query(grouped), ["a", "odd", "total"])
        changed = column_definitions(
            parse_query(grouped.replace("b % 2", "b % 3")), ["a", "odd", "total"]
        )
        assert defs["total"] != changed["total"], grouped
    # grouping by a plain column keeps the columns traceable one by one
    plain = "SELECT a, sum(c) AS total, max(b % 2) AS odd FROM t GROUP BY a"
    defs = column_definitions(parse_query(plain), ["total", "odd"])
    changed = column_definitions(parse_query(plain.replace("b % 2", "b % 3")), ["total", "odd"])
    assert defs["total"] == changed["total"] and defs["odd"] != changed["odd"]
