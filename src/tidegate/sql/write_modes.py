"""Statements of the publishes matched by a unique key (merge, append) and of what they leave
behind: the checksum of a written partition, the partitions a model already published.

Built as sqlglot expressions like every statement (see statements.py): identifiers quoted,
partition bounds bound by the driver as $start/$end or $key.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from tidegate.domain.model import Column
from tidegate.sql.statements import (
    DUCKDB,
    MARKERS,
    META_SCHEMA,
    Flavor,
    checksum,
    column,
    grouped_checksums,
    ident,
    partition_predicate,
    table,
)

# Names no model table can take (tables are plain identifiers): the published table and the
# staged rows in a publish matched by the unique key.
PUBLISHED_ALIAS = "tidegate:published"
STAGED_ALIAS = "tidegate:staged"


def _same_key(key: Sequence[str], partition_column: str, grain: str | None) -> exp.Expr:
    """A published row and a staged row with the same unique key in the same partition (time
    grains: the same `grain` bucket of the partition column; `grain` None: a key list's
    partition, which the window predicate already fixes)."""
    pairs: list[exp.Expr] = [
        exp.EQ(this=column(name, PUBLISHED_ALIAS), expression=column(name, STAGED_ALIAS))
        for name in key
    ]
    if grain is not None and partition_column not in key:
        pairs.append(
            exp.EQ(
                this=_truncated(column(partition_column, PUBLISHED_ALIAS), grain),
                expression=_truncated(column(partition_column, STAGED_ALIAS), grain),
            )
        )
    return exp.and_(*pairs)


def _truncated(value: exp.Expr, grain: str) -> exp.Expr:
    return exp.TimestampTrunc(
        this=exp.cast(value, exp.DataType.Type.TIMESTAMP), unit=exp.var(grain)
    )


def _aliased(target: exp.Table, alias: str) -> exp.Table:
    aliased = target.copy()
    aliased.set("alias", exp.TableAlias(this=ident(alias)))
    return aliased


def delete_matched(
    target: exp.Table,
    source: exp.Table,
    partition_column: str,
    keyed: bool,
    key: Sequence[str],
    grain: str | None,
    flavor: Flavor = DUCKDB,
    cursor: bool = False,
) -> str:
    """Merge, first half: delete the rows of the partitions being written whose unique key
    the staged rows hold (then every staged row is inserted)."""
    staged_rows = (
        exp.select(exp.Literal.number(1))
        .from_(_aliased(source, STAGED_ALIAS))
        .where(_same_key(key, partition_column, grain))
    )
    where = exp.and_(
        partition_predicate(partition_column, keyed, PUBLISHED_ALIAS, cursor),
        exp.Exists(this=staged_rows),
    )
    return flavor.render(exp.delete(_aliased(target, PUBLISHED_ALIAS), where=where))


def insert_unmatched(
    target: exp.Table,
    columns: Sequence[Column],
    source: exp.Table,
    partition_column: str,
    keyed: bool,
    key: Sequence[str],
    grain: str | None,
    flavor: Flavor = DUCKDB,
    cursor: bool = False,
) -> str:
    """Append with a unique key: insert the staged rows whose key the partitions being written
    do not hold yet."""
    names = [c.name for c in columns]
    published_rows = (
        exp.select(exp.Literal.number(1))
        .from_(_aliased(target, PUBLISHED_ALIAS))
        .where(
            exp.and_(
                partition_predicate(partition_column, keyed, PUBLISHED_ALIAS, cursor),
                _same_key(key, partition_column, grain),
            )
        )
    )
    select = (
        exp.select(*[column(n, STAGED_ALIAS) for n in names])
        .from_(_aliased(source, STAGED_ALIAS))
        .where(exp.not_(exp.Exists(this=published_rows)))
    )
    return flavor.render(
        exp.Insert(
            this=exp.Schema(this=target, expressions=[ident(n) for n in names]), expression=select
        )
    )


def partition_content(
    target: exp.Table,
    columns: Sequence[str],
    partition_column: str,
    grain: str | None,
    flavor: Flavor = DUCKDB,
    cursor: bool = False,
) -> str:
    """The checksum of what the partitions being written hold (their published rows, over
    `columns`), computed like a staged partition's: per time partition of `grain` (partition
    start, rows, digest), or for a key list's or a cursor's partition (`grain` None) one row
    (rows, digest)."""
    if grain is None:
        where = partition_predicate(partition_column, True, cursor=cursor)
        return checksum(target, columns, where, flavor)
    return grouped_checksums(target, columns, partition_column, grain, windowed=True, flavor=flavor)


def published_starts(count: int, flavor: Flavor = DUCKDB) -> str:
    """Partition starts of one model (the first positional value) that have a commit marker,
    among `count` starts (the next positional values)."""
    starts = [exp.Placeholder() for _ in range(count)]
    return flavor.render(
        exp.select(column("partition_start"))
        .distinct()
        .from_(table(MARKERS, META_SCHEMA))
        .where(
            exp.and_(
                exp.EQ(this=column("model"), expression=exp.Placeholder()),
                column("partition_start").isin(*starts),
            )
        )
    )
