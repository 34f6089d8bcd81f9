"""Spark SQL's spelling of tidegate's statements, and the statements only Spark runs.

The shared builders (statements.py, diff.py) take `SPARK` as their flavor: the same sqlglot
expressions, rendered in sqlglot's `spark` dialect. Models are written in the project dialect
(DuckDB's) and transpiled here; `$start`/`$end`/`$key` become Spark's named parameter markers
(`:start`), bound by `spark.sql(text, args=...)`, never pasted into the text.

Spark has no schemas of its own here: every table a statement reads is a temporary view that the
engine registers over the table's current Parquet directories. A table of a schema (a shadow
table of `validate`) is the view named `schema.table`, one quoted identifier.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from tidegate.domain.model import Column, WriteMode
from tidegate.sql.model_sql import SqlProblem, parse_type
from tidegate.sql.statements import (
    DIALECT,
    EPOCH_DAY,
    Flavor,
    bucket,
    column,
    ident,
    partition_predicate,
)
from tidegate.sql.write_modes import PUBLISHED_ALIAS, STAGED_ALIAS

SPARK_DIALECT = "spark"
# Staged rows: cached temporary views of the session under this prefix. No published table or
# source can take such a name (tidegate's own names start with `_tidegate`).
STAGING_PREFIX = "_tidegate_staging__"
TWO_TO_64 = 2**64
# The column a publish's rows carry their partition in, and the directories of its write are
# named by (`tidegate_slot=<partition start>`); a model cannot publish a column of that name.
SLOT_COLUMN = "tidegate_slot"
# Spark's two timestamp types: both are the project's TIMESTAMP (the session's time zone is UTC)
_TIMESTAMPS = frozenset({"timestamp", "timestamp_ntz"})


def view_name(name: str, schema: str | None = None) -> str:
    """The temporary view a table is read through."""
    return name if schema is None else f"{schema}.{name}"


def _as_view(node: exp.Expr) -> exp.Expr:
    """A table of a schema becomes its view, one identifier; the query's own name for the
    table keeps qualifying its columns."""
    if isinstance(node, exp.Table) and node.args.get("db") and not node.args.get("catalog"):
        view = exp.Table(this=ident(view_name(node.name, node.args["db"].name)))
        view.set("alias", node.args.get("alias") or exp.TableAlias(this=ident(node.name)))
        return view
    return node


def _ordered_window(node: exp.Expr) -> exp.Expr:
    """Spark numbers rows only in an ordered window; any order does for tidegate's numbering
    (which row of a repeated key is the second does not matter)."""
    if isinstance(node, exp.Window) and not node.args.get("order"):
        keys = node.args.get("partition_by") or [exp.Literal.number(1)]
        node.set("order", exp.Order(expressions=[exp.Ordered(this=k.copy()) for k in keys]))
    return node


def _spark_spelling(node: exp.Expr) -> exp.Expr:
    return _ordered_window(_as_view(node))


def render(expression: exp.Expr) -> str:
    """The statement as `spark.sql` runs it: `:name` parameter markers, views for tables."""
    return expression.copy().transform(_spark_spelling).sql(dialect=SPARK_DIALECT, comments=False)


def _hash64(hex_prefix: exp.Expr) -> exp.Expr:
    """16 hex digits → their unsigned value, exact (conv gives the decimal digits)."""
    converted = exp.Anonymous(
        this="conv",
        expressions=[hex_prefix, exp.Literal.number(16), exp.Literal.number(10)],
    )
    return exp.cast(converted, exp.DataType.build("DECIMAL(20, 0)", dialect=SPARK_DIALECT))


def _digest(hashed: exp.Expr) -> exp.Expr:
    """sum(hash) mod 2^64 in [0, 2^64): summed as DECIMAL(38, 0), which cannot overflow where
    BIGINT would (ANSI mode raises); a negative sum (native hashes) is taken modulo twice."""
    wide = exp.cast(hashed, exp.DataType.build("DECIMAL(38, 0)", dialect=SPARK_DIALECT))
    modulus = exp.Literal.number(TWO_TO_64)
    total = exp.Coalesce(this=exp.Sum(this=wide), expressions=[exp.Literal.number(0)])
    once = exp.Mod(this=total, expression=modulus)
    shifted = exp.Add(this=exp.paren(once), expression=modulus.copy())
    return exp.Mod(this=exp.paren(shifted), expression=modulus.copy())


def _position(values: exp.Expr, value: exp.Expr) -> exp.Expr:
    """1-based position, NULL when absent (Spark's array_position says 0)."""
    found = exp.Anonymous(this="array_position", expressions=[values, value])
    return exp.Nullif(this=found, expression=exp.Literal.number(0))


SPARK = Flavor(
    dialect=SPARK_DIALECT,
    render=render,
    hash64=_hash64,
    digest=_digest,
    native_hash=lambda values: exp.Anonymous(this="xxhash64", expressions=list(values)),
    position=_position,
    same_value=lambda left, right: exp.NullSafeEQ(this=left, expression=right),
    # Spark's date minus a date is an interval
    day_number=lambda day: exp.Anonymous(this="datediff", expressions=[day, EPOCH_DAY.copy()]),
)


# --- types ---------------------------------------------------------------------------------


def spark_type(canonical: str) -> exp.DataType:
    """A project type (DuckDB's spelling) as Spark's: TIMESTAMP is Spark's TIMESTAMP_NTZ."""
    return exp.DataType.build(canonical, dialect=DIALECT)


def spark_type_text(canonical: str) -> str:
    return spark_type(canonical).sql(dialect=SPARK_DIALECT)


def canonical_type(spark_simple: str) -> str:
    """A Spark type (as DataType.simpleString spells it) in the project's spelling; raises
    SqlProblem for a type tidegate cannot name (`void`: a bare NULL)."""
    if spark_simple in _TIMESTAMPS:
        return "TIMESTAMP"
    try:
        parsed = exp.DataType.build(spark_simple, dialect=SPARK_DIALECT)
    except (SqlglotError, ValueError):
        raise SqlProblem(f"unknown column type {spark_simple!r}") from None
    return parse_type(parsed.sql(dialect=DIALECT))


def schema_ddl(columns: Sequence[Column]) -> str:
    """A table's columns as the DDL schema string Spark's readers take (`a BIGINT, b STRING`)."""
    return ", ".join(
        f"{ident(c.name).sql(dialect=SPARK_DIALECT)} {spark_type_text(c.type)}" for c in columns
    )


# --- statements ----------------------------------------------------------------------------


def staged(name: str) -> exp.Table:
    return exp.Table(this=ident(STAGING_PREFIX + name))


@functools.lru_cache(maxsize=64)
def _parsed(query_sql: str) -> exp.Expr:
    # A model's query is the same for every partition: parse it once.
    return sqlglot.parse_one(query_sql, dialect=DIALECT)


def model_query(query_sql: str) -> str:
    """A model's query (project dialect) as Spark SQL."""
    return render(_parsed(query_sql))


def select_all(source: exp.Table) -> str:
    return render(exp.select(exp.Star()).from_(source))


def cache_staging(target: exp.Table, query_sql: str) -> str:
    """Staged rows: the query's result cached at once as a temporary view of the session."""
    return render(exp.Cache(this=target, expression=_parsed(query_sql).copy(), lazy=False))


@functools.lru_cache(maxsize=256)
def tables_read(statement: str) -> frozenset[str]:
    """The names of the tables (views) a rendered statement reads, less its own CTEs and the
    staged views."""
    parsed = sqlglot.parse_one(statement, dialect=SPARK_DIALECT)
    ctes = {cte.alias_or_name for cte in parsed.find_all(exp.CTE)}
    return frozenset(
        t.name
        for t in parsed.find_all(exp.Table)
        if isinstance(t.this, exp.Identifier)
        and t.name not in ctes
        and not t.name.startswith(STAGING_PREFIX)
    )


def _typed(columns: Sequence[Column], present: Collection[str]) -> list[exp.Expr]:
    """The columns typed as the table's; one `present` lacks is NULL."""
    return [
        exp.cast(column(c.name) if c.name in present else exp.Null(), spark_type(c.type)).as_(
            ident(c.name)
        )
        for c in columns
    ]


def _matched(key: Sequence[str], outer: str, inner: exp.Table, inner_alias: str) -> exp.Expr:
    """EXISTS a row of `inner` in the same partition with the same unique key as the row of
    `outer` (NULL keys match nothing, as in the SQL engines' merge)."""
    same = exp.and_(
        *[
            exp.EQ(this=column(k, inner_alias), expression=column(k, outer))
            for k in [*key, SLOT_COLUMN]
        ]
    )
    source = inner.copy()
    source.set("alias", exp.TableAlias(this=ident(inner_alias)))
    return exp.Exists(this=exp.select(exp.Literal.number(1)).from_(source).where(same))


def slot_of(partition_column: str, grain: str | None) -> exp.Expr:
    """Which partition a row is in, as its start: by `grain` on the partition column, or
    (None: a publish of one partition) the bound `$slot`."""
    if grain is None:
        return exp.cast(exp.Placeholder(this="slot"), exp.DataType.Type.BIGINT)
    return bucket(partition_column, grain, SPARK)


def publish_rows(
    published: exp.Table,
    source: exp.Table,
    columns: Sequence[Column],
    staged_columns: Collection[str],
    existing: Collection[str] | None,
    partition_column: str,
    keyed: bool,
    grain: str | None,
    mode: WriteMode,
    key: Sequence[str],
) -> str:
    """What the partitions of a publish's window ($start/$end or $key) hold after it, typed as
    the table's `columns`, each row with its partition (`SLOT_COLUMN`, see `slot_of`): the
    staged rows, and by the write mode the rows they held before (`existing`: the published
    table's columns, None when there is no table yet). A column of the table that the staged
    rows (`staged_columns`) or the old rows lack is NULL.

    - overwrite: the staged rows;
    - merge: the published rows whose unique key no staged row of their partition holds, and
      every staged row;
    - append: the published rows, and the staged rows whose key their partition does not hold
      (without a key, every staged row).
    """
    slot = slot_of(partition_column, grain).as_(ident(SLOT_COLUMN))
    staged_rows = exp.Table(this=ident(STAGED_ALIAS))
    names = [*[c.name for c in columns], SLOT_COLUMN]
    new = (
        exp.select(*_typed(columns, staged_columns), slot)
        .from_(source.copy())
        .where(partition_predicate(partition_column, keyed))
    )
    select_new = exp.select(*[column(n) for n in names]).from_(staged_rows.copy())
    if mode is WriteMode.OVERWRITE or existing is None:
        return render(select_new.with_(ident(STAGED_ALIAS), as_=new))
    old = (
        exp.select(*_typed(columns, existing), slot.copy())
        .from_(published.copy())
        .where(partition_predicate(partition_column, keyed))
    )
    published_rows = exp.Table(this=ident(PUBLISHED_ALIAS))
    select_old = exp.select(*[column(n, "p") for n in names]).from_(
        exp.Table(this=ident(PUBLISHED_ALIAS), alias=exp.TableAlias(this=ident("p")))
    )
    if mode is WriteMode.MERGE:
        select_old = select_old.where(exp.not_(_matched(key, "p", staged_rows, "s")))
    elif key:
        select_new = exp.select(*[column(n, "s") for n in names]).from_(
            exp.Table(this=ident(STAGED_ALIAS), alias=exp.TableAlias(this=ident("s")))
        )
        select_new = select_new.where(exp.not_(_matched(key, "s", published_rows, "p2")))
    union = exp.union(select_old, select_new, distinct=False)
    return render(union.with_(ident(STAGED_ALIAS), as_=new).with_(ident(PUBLISHED_ALIAS), as_=old))


def copy_to_parquet(source: exp.Table, path: str) -> str:
    """DuckDB's statement writing a table to one Parquet file (the example's orders)."""
    statement = sqlglot.parse_one("COPY t TO 'file' (FORMAT PARQUET)", dialect=DIALECT)
    statement.set("this", source)
    statement.set("files", [exp.Literal.string(path)])
    return statement.sql(dialect=DIALECT)
