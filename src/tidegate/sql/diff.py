"""SQL of `tidegate diff`: compare two versions' outputs partition by partition in the engine.

Two statements, both grouped by partition so that what reaches Python is one row per partition
(aggregates) or per partition and kind of difference (counts and at most a few sample keys):

- `partition_summaries`: per partition of one table, the row count, the sum of each numeric
  column (as exact text) and the NULL count of each column;
- `key_differences`: the rows of two tables joined per partition on a unique key: how many keys
  only one side has, how many are on both sides with some compared column changed (and which
  columns), and the first keys of each kind in key order.

A row's partition is computed from its partition column: the start of its time partition in epoch
seconds, or for key lists the position of its value in the declared keys (bound as `$keys`). The
window of a comparison is bound as `$start`/`$end` (time grains, on the column itself so the
engine can skip blocks) or `$lo`/`$hi` (key positions); a tolerance as `$tolerance`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from tidegate.sql.statements import (
    DIALECT,
    DUCKDB,
    Flavor,
    bucket,
    column,
    ident,
    partition_predicate,
)

# Names no model column can take (model columns are plain identifiers).
BUCKET = "tidegate:bucket"
PRESENT = "tidegate:present"
KIND = "tidegate:kind"
NUMBER = "tidegate:n"
LEFT = "tidegate:left"
RIGHT = "tidegate:right"
JOINED = "tidegate:joined"
NUMBERED = "tidegate:numbered"

# How a column is compared between the two sides
EXACT = "exact"  # IS DISTINCT FROM, in the column's own type
TEXT = "text"  # the two sides have different types: compared as text
NUMERIC = "numeric"  # numbers on both sides: changed beyond a relative $tolerance


@dataclass(frozen=True)
class Rows:
    """The rows of one table, placed into partitions of `grain` by `partition_column`."""

    source: exp.Table
    partition_column: str
    grain: str


def _key_alias(i: int) -> str:
    return f"tidegate:key:{i}"


def _changed_alias(i: int) -> str:
    return f"tidegate:changed:{i}"


def partition_of(partition_column: str, grain: str, flavor: Flavor = DUCKDB) -> exp.Expr:
    """The partition a row falls in: a time partition's start (epoch seconds), or the position
    of the row's key in the declared keys bound as `$keys` (NULL for an undeclared key)."""
    if grain != "key":
        return bucket(partition_column, grain, flavor)
    keys = exp.cast(exp.Placeholder(this="keys"), exp.DataType.build("VARCHAR[]", dialect=DIALECT))
    position = flavor.position(keys, exp.cast(column(partition_column), exp.DataType.Type.VARCHAR))
    return exp.cast(
        exp.Sub(this=position, expression=exp.Literal.number(1)), exp.DataType.Type.BIGINT
    )


def window(partition_column: str, grain: str, flavor: Flavor = DUCKDB) -> exp.Expr:
    """Rows of the partitions in the bound window: [$start, $end) on a time column, positions
    [$lo, $hi) of a key list."""
    if grain != "key":
        return partition_predicate(partition_column, keyed=False)
    position = partition_of(partition_column, grain, flavor)
    return exp.and_(
        exp.GTE(this=position, expression=exp.Placeholder(this="lo")),
        exp.LT(this=position.copy(), expression=exp.Placeholder(this="hi")),
    )


def _is_null(expression: exp.Expr) -> exp.Expr:
    return exp.Is(this=expression, expression=exp.Null())


def partition_summaries(
    rows: Rows,
    columns: Sequence[str],
    numeric: Sequence[str],
    windowed: bool,
    flavor: Flavor = DUCKDB,
) -> str:
    """Per partition: (partition, row count, the sum of each `numeric` column as text, the NULL
    count of each of `columns`). One pass over the table (its window when `windowed`)."""
    key = partition_of(rows.partition_column, rows.grain, flavor)
    count = exp.Count(this=exp.Star())
    select = exp.select(
        key.as_(ident(BUCKET)),
        count.copy(),
        *[exp.cast(exp.Sum(this=column(name)), exp.DataType.Type.VARCHAR) for name in numeric],
        *[
            exp.Filter(this=count.copy(), expression=exp.Where(this=_is_null(column(name))))
            for name in columns
        ],
    ).from_(rows.source)
    if windowed:
        select = select.where(window(rows.partition_column, rows.grain, flavor))
    return flavor.render(select.group_by(key.copy()))


def _side(rows: Rows, names: Sequence[str], windowed: bool, flavor: Flavor) -> exp.Select:
    select = exp.select(
        partition_of(rows.partition_column, rows.grain, flavor).as_(ident(BUCKET)),
        exp.true().as_(ident(PRESENT)),
        *[column(name) for name in names],
    ).from_(rows.source)
    return select.where(window(rows.partition_column, rows.grain, flavor)) if windowed else select


def _of(side: str, name: str) -> exp.Column:
    return exp.Column(this=ident(name), table=ident(side))


def _pair(name: str, mode: str) -> tuple[exp.Expr, exp.Expr]:
    left, right = _of(LEFT, name), _of(RIGHT, name)
    if mode == TEXT:
        return (
            exp.cast(left, exp.DataType.Type.VARCHAR),
            exp.cast(right, exp.DataType.Type.VARCHAR),
        )
    return left, right


def _changed(name: str, mode: str) -> exp.Expr:
    """Whether a compared column differs between the two sides of a joined key."""
    left, right = _pair(name, mode)
    distinct = exp.NullSafeNEQ(this=left, expression=right)
    if mode != NUMERIC:
        return distinct
    # beyond a relative tolerance: |l - r| > $tolerance * max(|l|, |r|)
    tolerance = exp.cast(exp.Placeholder(this="tolerance"), exp.DataType.Type.DOUBLE)
    gap = exp.Abs(this=exp.Sub(this=left.copy(), expression=right.copy()))
    scale = exp.Greatest(this=exp.Abs(this=left.copy()), expressions=[exp.Abs(this=right.copy())])
    beyond = exp.GT(this=gap, expression=exp.Mul(this=tolerance, expression=scale))
    either_null = exp.or_(_is_null(left.copy()), _is_null(right.copy()))
    return exp.and_(distinct, exp.paren(exp.or_(either_null, beyond)))


def key_differences(
    left: Rows,
    right: Rows,
    key: Sequence[tuple[str, str]],
    compared: Sequence[tuple[str, str]],
    sample: int,
    flavor: Flavor = DUCKDB,
) -> str:
    """Per partition and kind of difference (`only_left`, `only_right`, `changed`): (partition,
    kind, keys, the first `sample` keys in key order as lists of text, then per compared column
    how many of those keys changed it).

    `key` and `compared` are (column, mode) pairs; the mode (EXACT, TEXT, NUMERIC) says how the
    two sides' values are compared. Both sides are read in the bound window. Identical keys
    produce no row.
    """
    key_names = [name for name, _ in key]
    names = [*key_names, *[name for name, _ in compared if name not in key_names]]
    on = exp.and_(
        exp.EQ(this=_of(LEFT, BUCKET), expression=_of(RIGHT, BUCKET)),
        *[flavor.same_value(a, b) for a, b in (_pair(n, m) for n, m in key)],
    )
    changes = [_changed(name, mode) for name, mode in compared]
    kind = exp.Case(
        ifs=[
            exp.If(this=_is_null(_of(RIGHT, PRESENT)), true=exp.Literal.string("only_left")),
            exp.If(this=_is_null(_of(LEFT, PRESENT)), true=exp.Literal.string("only_right")),
        ]
        + (
            [exp.If(this=exp.or_(*[c.copy() for c in changes]), true=exp.Literal.string("changed"))]
            if changes
            else []
        )
    )
    keys_out = [
        exp.Coalesce(this=a, expressions=[b]).as_(ident(_key_alias(i)))
        for i, (a, b) in enumerate(_pair(n, m) for n, m in key)
    ]
    joined = (
        exp.select(
            exp.Coalesce(this=_of(LEFT, BUCKET), expressions=[_of(RIGHT, BUCKET)]).as_(
                ident(BUCKET)
            ),
            kind.as_(ident(KIND)),
            *keys_out,
            *[c.as_(ident(_changed_alias(i))) for i, c in enumerate(changes)],
        )
        .from_(exp.Table(this=ident(LEFT)))
        .join(exp.Table(this=ident(RIGHT)), on=on, join_type="FULL OUTER")
    )
    key_columns = [column(_key_alias(i)) for i in range(len(key))]
    in_key_order = [exp.Ordered(this=k.copy(), nulls_first=False) for k in key_columns]
    numbered = (
        exp.select(
            exp.Star(),
            exp.Window(
                this=exp.RowNumber(),
                partition_by=[column(BUCKET), column(KIND)],
                order=exp.Order(expressions=[o.copy() for o in in_key_order]),
            ).as_(ident(NUMBER)),
        )
        .from_(exp.Table(this=ident(JOINED)))
        .where(exp.not_(_is_null(column(KIND))))
    )
    as_text = exp.Array(
        expressions=[exp.cast(k.copy(), exp.DataType.Type.VARCHAR) for k in key_columns]
    )
    first_keys = exp.Filter(
        this=exp.ArrayAgg(
            this=exp.Order(this=as_text, expressions=[o.copy() for o in in_key_order])
        ),
        expression=exp.Where(
            this=exp.LTE(this=column(NUMBER), expression=exp.Literal.number(sample))
        ),
    )
    count = exp.Count(this=exp.Star())
    select = (
        exp.select(
            column(BUCKET),
            column(KIND),
            count.copy(),
            first_keys,
            *[
                exp.Filter(this=count.copy(), expression=exp.Where(this=column(_changed_alias(i))))
                for i in range(len(changes))
            ],
        )
        .from_(exp.Table(this=ident(NUMBERED)))
        .group_by(column(BUCKET), column(KIND))
    )
    select = select.with_(ident(LEFT), as_=_side(left, names, True, flavor))
    select = select.with_(ident(RIGHT), as_=_side(right, names, True, flavor))
    select = select.with_(ident(JOINED), as_=joined)
    select = select.with_(ident(NUMBERED), as_=numbered)
    return flavor.render(select)
