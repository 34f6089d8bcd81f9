"""Statements of the `update` write mode: columns of an existing table set, one key range at a
time, to expressions over the row's own columns.

The expressions are the model's (project dialect, parsed by sqlglot, transpiled by the flavor);
identifiers are quoted, and the range's bounds are the placeholders `$start`/`$end`, bound by
the driver. The UPDATE evaluates each expression on the row as it is when the row is locked, and
touches only rows whose value differs: a value the application wrote meanwhile is compared, not
overwritten with one computed earlier.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from tidegate.domain.model import CheckSpec
from tidegate.sql import nesting
from tidegate.sql.sandbox import refused_call
from tidegate.sql.statements import DIALECT, DUCKDB, Flavor, check_violations, column, ident, table

Assignments = Sequence[tuple[str, str]]
INTEGER_TYPES = frozenset(exp.DataType.INTEGER_TYPES) - {exp.DataType.Type.BIT}


def is_integer_type(type_text: str) -> bool:
    """Whether a column type (as an engine names it) holds integers."""
    try:
        parsed = exp.DataType.build(type_text, dialect=DIALECT)
    except SqlglotError:
        return False
    return parsed.this in INTEGER_TYPES


# functions whose value is not the row's alone: a rerun of a range would not set the same values,
# and its audit could not tell the expression's value from the stored one
VOLATILE_NODES: tuple[type[exp.Expr], ...] = tuple(
    getattr(exp, name)
    for name in (
        "Rand",
        "Randn",
        "Uuid",
        "CurrentTimestamp",
        "CurrentTimestampLTZ",
        "CurrentDate",
        "CurrentDatetime",
        "CurrentTime",
        "Localtimestamp",
        "Localtime",
    )
    if hasattr(exp, name)
)
VOLATILE_FUNCTIONS = frozenset(
    {
        "now",
        "random",
        "setseed",
        "nextval",
        "currval",
        "lastval",
        "setval",
        "clock_timestamp",
        "statement_timestamp",
        "transaction_timestamp",
        "timeofday",
        "get_current_timestamp",
        "get_current_time",
        "txid_current",
        "pg_current_xact_id",
        "gen_random_uuid",
        "uuid",
        "uuidv4",
        "uuidv7",
        "current_setting",
        "pg_backend_pid",
    }
)


def volatile_function(parsed: exp.Expr) -> str | None:
    """The first function of `parsed` whose value is not the row's alone (None: it has none)."""
    for node in parsed.walk():
        if isinstance(node, VOLATILE_NODES):
            return node.sql(dialect=DIALECT)
        if isinstance(node, exp.Anonymous) and str(node.name).lower() in VOLATILE_FUNCTIONS:
            return f"{node.name}()"
    return None


def assignment_problem(text: str) -> str | None:
    """Why `text` cannot be the value an update sets (None when it can): one scalar expression
    over the row's own columns — no aggregate, window, subquery, parameter, qualified name or
    volatile function (random, now, nextval, …: a rerun must set the values it audits)."""
    try:
        parsed = nesting.parse_one(text, DIALECT, into=exp.Condition)
    except nesting.TooDeep:
        return f"is {nesting.TOO_DEEP}"
    except SqlglotError:
        return "is not an SQL expression"
    for node in parsed.walk():
        if isinstance(node, exp.AggFunc | exp.Window):
            return "is an aggregate or window; an update sets each row from its own columns"
        if isinstance(node, exp.Subquery | exp.Select):
            return "reads other rows (a subquery); an update sets each row from its own columns"
        if isinstance(node, exp.Placeholder | exp.Parameter):
            return "uses a parameter; the range's bounds are tidegate's"
        if isinstance(node, exp.Column) and node.table:
            return f"qualifies column {node.sql(dialect=DIALECT)}; name the table's own columns"
        if isinstance(node, exp.Star):
            return "uses *"
    volatile = volatile_function(parsed)
    if volatile is not None:
        return (
            f"calls {volatile}, whose value is not the row's alone: an update sets each row "
            "from its own columns, the same on every rerun"
        )
    refused = refused_call(parsed)
    if refused is not None:
        return f"calls {refused.function}, which an update may not: {refused.advice}"
    return None


def _expression(text: str) -> exp.Expr:
    """A declared expression with its column names quoted (they are the table's)."""
    parsed = sqlglot.parse_one(text, dialect=DIALECT)

    def quote(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column):
            return column(node.name)
        return node

    return parsed.transform(quote)


def _in_range(key: str) -> exp.Expr:
    """Rows of the key range [$start, $end)."""
    lower = exp.GTE(this=column(key), expression=exp.Placeholder(this="start"))
    upper = exp.LT(this=column(key), expression=exp.Placeholder(this="end"))
    return exp.and_(lower, upper)


def _differs(col: str, expression: str) -> exp.Expr:
    return exp.NullSafeNEQ(this=column(col), expression=exp.paren(_expression(expression)))


def _any_differs(assignments: Assignments) -> exp.Expr:
    return exp.or_(*[_differs(c, e) for c, e in assignments])


def update_range(target: str, key: str, assignments: Assignments, flavor: Flavor = DUCKDB) -> str:
    """Set each column of the range's rows whose value differs from its expression."""
    statement = exp.Update(
        this=table(target),
        expressions=[exp.EQ(this=column(c), expression=_expression(e)) for c, e in assignments],
        where=exp.Where(this=exp.and_(_in_range(key), exp.paren(_any_differs(assignments)))),
    )
    return flavor.render(statement)


def lock_range(target: str, key: str, assignments: Assignments, flavor: Flavor) -> str:
    """Lock the range's differing rows in key order (SELECT … ORDER BY key FOR UPDATE): the
    UPDATE that follows waits for no row it does not hold already, unless one starts to differ
    meanwhile, and a writer that locks rows in key order too never deadlocks with it."""
    select = (
        exp.select(column(key))
        .from_(table(target))
        .where(exp.and_(_in_range(key), exp.paren(_any_differs(assignments))))
        .order_by(column(key))
        .lock(update=True)
    )
    return flavor.render(select)


def audit_range(
    target: str,
    key: str,
    assignments: Assignments,
    checks: Sequence[CheckSpec],
    flavor: Flavor = DUCKDB,
) -> str:
    """One pass over the range: its rows, then per assignment the rows whose column differs
    from the expression, then per check its violating rows."""
    count = exp.Count(this=exp.Star())
    measures: list[exp.Expr] = [count]
    measures += [
        exp.Filter(this=count.copy(), expression=exp.Where(this=_differs(c, e)))
        for c, e in assignments
    ]
    measures += [check_violations(check) for check in checks]
    select = exp.select(*measures).from_(table(target)).where(_in_range(key))
    return flavor.render(select)


def probe_values(
    target: str, typed: Sequence[tuple[str, str, str | None]], flavor: Flavor = DUCKDB
) -> str:
    """Each expression on one row of the table, cast to its column's type (None: as it is):
    whether the values can be computed and stored, without writing anything."""
    values: list[exp.Expr] = []
    for col, expression, type_text in typed:
        value: exp.Expr = exp.paren(_expression(expression))
        if type_text is not None:
            try:
                to = exp.DataType.build(type_text, dialect=DIALECT)
            except SqlglotError:
                to = None
            if to is not None:
                value = exp.Cast(this=value, to=to)
        values.append(value.as_(ident(col)))
    return flavor.render(exp.select(*values).from_(table(target)).limit(1))


def null_keys(target: str, key: str, flavor: Flavor = DUCKDB) -> str:
    """Rows of the table whose key is NULL: in no key range."""
    return flavor.render(
        exp.select(exp.Count(this=exp.Star()))
        .from_(table(target))
        .where(exp.Is(this=column(key), expression=exp.Null()))
    )


def key_bounds(target: str, key: str, flavor: Flavor = DUCKDB) -> str:
    """The smallest and largest key of the table."""
    return flavor.render(
        exp.select(exp.Min(this=column(key)), exp.Max(this=column(key))).from_(table(target))
    )


def rows_per_chunk(target: str, key: str, chunk_size: int, flavor: Flavor = DUCKDB) -> str:
    """Rows of [$start, $end) per chunk, by the chunk's first key (what a dry run shows)."""
    size = exp.Literal.number(chunk_size)
    # a floored remainder: chunks of negative keys start below them too
    remainder = exp.Mod(
        this=exp.paren(exp.Add(this=exp.Mod(this=column(key), expression=size), expression=size)),
        expression=size.copy(),
    )
    first = exp.Sub(this=column(key), expression=remainder)
    select = (
        exp.select(first.as_("chunk"), exp.Count(this=exp.Star()))
        .from_(table(target))
        .where(_in_range(key))
        .group_by(exp.column("chunk"))
        .order_by(exp.column("chunk"))
    )
    return flavor.render(select)


def preview(target: str, key: str, assignments: Assignments) -> str:
    """What an update model sets, as a SELECT in the project dialect: a version's definition,
    and what its fingerprint reads."""
    select = (
        exp.select(column(key), *[_expression(e).as_(ident(c)) for c, e in assignments])
        .from_(table(target))
        .where(_in_range(key))
    )
    return select.sql(dialect=DIALECT, pretty=True)
