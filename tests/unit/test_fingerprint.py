"""Fingerprints (docs/design.md §3 Build): a hash of the normalized SQL AST + config + upstream
fingerprints.

Formatting does not make a new version; logic, config and upstream versions do.
"""

from __future__ import annotations

import dataclasses
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kit import example_project
from tidegate.domain.fingerprint import fingerprint, short
from tidegate.domain.model import CheckSpec, Column, Severity
from tidegate.ops.build import snapshot
from tidegate.project.loader import Project, load_project
from tidegate.sql.model_sql import normalized, parse_query

# The daily_revenue SELECT of the example, without its comments.
DAILY_SQL = """SELECT
    CAST(order_ts AS DATE) AS order_date,
    status,
    count(*) AS order_count,
    CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross_revenue,
    CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue
FROM orders
WHERE order_ts >= $start AND order_ts < $end
GROUP BY CAST(order_ts AS DATE), status"""

KEYWORDS = re.compile(
    r"\b(SELECT|CAST|AS|DATE|count|sum|DECIMAL|FROM|WHERE|AND|GROUP|BY)\b", re.IGNORECASE
)
SEPARATORS = (" ", "\n", "\t", "  \n      ", " /* a note */ ", " -- a line comment\n", "\r\n")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Project:
    root = example_project(tmp_path_factory.mktemp("fingerprint") / "proj", deploy=False)
    return load_project(root)


def fingerprint_of(
    project: Project, model: str, sql: str | None = None, **spec_changes: object
) -> str:
    spec = project.models[model]
    if sql is not None or spec_changes:
        spec = dataclasses.replace(
            spec, **({"sql": sql} if sql is not None else {}), **spec_changes
        )  # type: ignore[arg-type]
    upstream = {parent: "f" * 64 for parent in spec.upstream}
    return snapshot(project, spec, upstream)[0]


def reformat(sql: str, rnd: random.Random) -> str:
    def recase(match: re.Match[str]) -> str:
        word = match.group(0)
        return rnd.choice((word.upper(), word.lower(), word.title()))

    # sqlglot does not parse a comment inside GROUP BY: keep the two words together.
    glued = re.sub(r"(GROUP)\s+(BY)", r"\1\0\2", KEYWORDS.sub(recase, sql), flags=re.IGNORECASE)
    tokens = glued.split()
    text = tokens[0]
    for token in tokens[1:]:
        text += rnd.choice(SEPARATORS) + token
    text = text.replace("\0", rnd.choice((" ", "\n", "\t ")))
    prefix = rnd.choice(("", "-- leading comment\n", "/* block\n comment */\n", "\n\n  "))
    return prefix + text + rnd.choice(("", "\n", " -- trailing", "\n/* end */"))


def test_the_example_model_is_the_sql_under_test(loaded: Project) -> None:
    assert fingerprint_of(loaded, "daily_revenue") == fingerprint_of(
        loaded, "daily_revenue", DAILY_SQL
    )


@settings(deadline=None, max_examples=60)
@given(rnd=st.randoms(use_true_random=False))
def test_whitespace_comments_and_keyword_case_do_not_change_it(
    loaded: Project, rnd: random.Random
) -> None:
    variant = reformat(DAILY_SQL, rnd)
    assert normalized(parse_query(variant)) == normalized(parse_query(DAILY_SQL))
    assert fingerprint_of(loaded, "daily_revenue", variant) == fingerprint_of(
        loaded, "daily_revenue", DAILY_SQL
    )


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(DAILY_SQL.replace("- discount - refund", "- discount"), id="formula"),
        pytest.param(DAILY_SQL.replace("order_ts < $end", "order_ts <= $end"), id="operator"),
        pytest.param(DAILY_SQL.replace("count(*)", "count(DISTINCT customer_id)"), id="aggregate"),
        pytest.param(
            DAILY_SQL.replace("DECIMAL(18, 2)) AS net", "DECIMAL(18, 3)) AS net"), id="type"
        ),
        pytest.param(DAILY_SQL + " HAVING count(*) > 0", id="clause"),
        pytest.param(DAILY_SQL.replace("status", "upper(status)", 1), id="expression"),
    ],
)
def test_a_semantic_sql_change_changes_it(loaded: Project, changed: str) -> None:
    assert changed != DAILY_SQL
    assert fingerprint_of(loaded, "daily_revenue", changed) != fingerprint_of(
        loaded, "daily_revenue"
    )


def test_a_string_literal_is_not_normalized_away(loaded: Project) -> None:
    base = DAILY_SQL.replace("FROM orders", "FROM orders WHERE status <> 'x'", 1)
    base = base.replace("\nWHERE order_ts", " AND order_ts", 1)
    upper = base.replace("'x'", "'X'")
    assert fingerprint_of(loaded, "daily_revenue", base) != fingerprint_of(
        loaded, "daily_revenue", upper
    )


def test_a_config_change_changes_it(loaded: Project) -> None:
    spec = loaded.models["daily_revenue"]
    base = fingerprint_of(loaded, "daily_revenue")
    extra_check = CheckSpec(
        "no_null_status", "not_null", Severity.BLOCKING, {"columns": ["status"]}
    )
    warn_instead = tuple(dataclasses.replace(c, severity=Severity.WARN) for c in spec.checks)
    retyped = tuple(
        Column(c.name, "DOUBLE", c.nullable) if c.name == "net_revenue" else c for c in spec.columns
    )
    relaxed = tuple(Column(c.name, c.type, True) for c in spec.columns)
    variants = {
        "check added": fingerprint_of(loaded, "daily_revenue", checks=(*spec.checks, extra_check)),
        "severity": fingerprint_of(loaded, "daily_revenue", checks=warn_instead),
        "column type": fingerprint_of(loaded, "daily_revenue", columns=retyped),
        "nullability": fingerprint_of(loaded, "daily_revenue", columns=relaxed),
        "schedule": fingerprint_of(loaded, "daily_revenue", schedule="0 4 * * *"),
        "start": fingerprint_of(loaded, "daily_revenue", start="2025-02-01"),
        "unique key": fingerprint_of(loaded, "daily_revenue", unique_key=("order_date",)),
    }
    assert all(value != base for value in variants.values()), variants
    assert len(set(variants.values())) == len(variants)


def test_a_source_definition_change_changes_it(loaded: Project) -> None:
    base = fingerprint_of(loaded, "daily_revenue")
    moved = dataclasses.replace(
        loaded,
        sources={
            "orders": dataclasses.replace(loaded.sources["orders"], table="orders_v2"),
        },
    )
    assert fingerprint_of(moved, "daily_revenue") != base


def test_an_upstream_fingerprint_change_changes_it(loaded: Project) -> None:
    spec = loaded.models["monthly_revenue"]
    assert spec.upstream == ("daily_revenue",)
    one = snapshot(loaded, spec, {"daily_revenue": "a" * 64})[0]
    again = snapshot(loaded, spec, {"daily_revenue": "a" * 64})[0]
    other = snapshot(loaded, spec, {"daily_revenue": "b" * 64})[0]
    assert one == again
    assert one != other


def test_the_rendered_sql_reads_the_physical_source_table(loaded: Project) -> None:
    moved = dataclasses.replace(
        loaded,
        sources={"orders": dataclasses.replace(loaded.sources["orders"], table="orders_v2")},
    )
    rendered = snapshot(moved, moved.models["daily_revenue"], {})[1]
    assert '"orders_v2"' in rendered or "orders_v2" in rendered
    assert "$start" in rendered and "$end" in rendered


def test_fingerprint_is_canonical_json() -> None:
    config = {"grain": "day", "columns": [["a", "BIGINT", True]], "keys": []}
    reordered = {"keys": [], "columns": [["a", "BIGINT", True]], "grain": "day"}
    upstream = {"a": "1" * 64, "b": "2" * 64}
    value = fingerprint("SELECT 1", config, upstream)
    assert value == fingerprint("SELECT 1", reordered, dict(reversed(list(upstream.items()))))
    assert re.fullmatch(r"[0-9a-f]{64}", value)
    assert short(value) == value[:12]
    assert value != fingerprint("SELECT 2", config, upstream)
    assert value != fingerprint("SELECT 1", {**config, "grain": "hour"}, upstream)
    assert value != fingerprint("SELECT 1", config, {"a": "1" * 64})
    assert value != fingerprint("SELECT 1", config, {**upstream, "b": "3" * 64})


def test_fingerprint_on_disk_matches_the_loaded_file(tmp_path: Path, loaded: Project) -> None:
    """Rewriting the file's body with other formatting loads to the same fingerprint."""
    copy = example_project(tmp_path / "proj", deploy=False)
    path = copy / "models" / "daily_revenue.sql"
    text = path.read_text()
    header_end = text.index("*/") + 2
    path.write_text(text[:header_end] + "\n" + reformat(DAILY_SQL, random.Random(7)) + "\n")
    reloaded = load_project(copy)
    assert fingerprint_of(reloaded, "daily_revenue") == fingerprint_of(loaded, "daily_revenue")
