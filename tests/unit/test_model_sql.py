"""Reading a model's SQL: only one SELECT, tables it reads, parameters, types, predicates."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from tidegate.sql.model_sql import (
    SqlProblem,
    parameters,
    parse_query,
    parse_type,
    predicate_problem,
    referenced_tables,
)


@contextlib.contextmanager
def step() -> Iterator[None]:
    yield


def test_a_sql_problem_keeps_its_identity_through_a_context_manager() -> None:
    # writer sessions are context managers; an SqlProblem raised inside one (e.g. a staged column
    # type sqlglot cannot name) must arrive as itself, not as a FrozenInstanceError.
    with pytest.raises(SqlProblem) as raised, step():
        raise SqlProblem("unknown column type 'NULL'", 3)
    assert raised.value.message == "unknown column type 'NULL'"
    assert raised.value.line == 3


@pytest.mark.parametrize(
    "text",
    [
        "DELETE FROM orders",
        "SELECT 1; DROP TABLE orders",
        "INSERT INTO orders VALUES (1)",
        "CREATE TABLE x AS SELECT 1",
        "UPDATE orders SET status = 'x'",
    ],
)
def test_only_one_select_is_a_model(text: str) -> None:
    with pytest.raises(SqlProblem):
        parse_query(text)


def test_tables_and_parameters() -> None:
    query = parse_query(
        "WITH recent AS (SELECT * FROM orders WHERE order_ts >= $start) "
        "SELECT * FROM recent JOIN customers USING (customer_id) WHERE order_ts < $end"
    )
    assert referenced_tables(query) == {"orders", "customers"}
    assert parameters(query) == {"start", "end"}


@pytest.mark.parametrize(
    ("declared", "canonical"),
    [
        ("bigint", "BIGINT"),
        ("int8", "BIGINT"),
        ("DECIMAL(18,2)", "DECIMAL(18, 2)"),
        ("date", "DATE"),
    ],
)
def test_types_are_canonical(declared: str, canonical: str) -> None:
    assert parse_type(declared) == canonical


@pytest.mark.parametrize("declared", ["frobnicate", "NOT A TYPE", ""])
def test_unknown_types_are_refused(declared: str) -> None:
    with pytest.raises(SqlProblem, match="unknown column type"):
        parse_type(declared)


def test_predicates() -> None:
    assert predicate_problem("net_revenue <= gross_revenue") is None
    assert predicate_problem("1 = 1; DROP TABLE orders") == "is not a valid SQL predicate"
    assert predicate_problem("SELECT 1") == "is not a valid SQL predicate"
    assert predicate_problem("net_revenue <=") == (
        "is not a valid SQL predicate: something is missing after '<='"
    )
    assert predicate_problem("length(current_setting('threads')) > 0") == (
        "function current_setting is not allowed in a check: "
        "the engine's settings are not for a project's SQL to read or change"
    )
