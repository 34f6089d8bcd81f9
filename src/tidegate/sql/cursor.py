"""Statements of cursor models: the cursor's extent in its source (with the snapshot it was read
in, where transactions commit out of order), where a batch of at most N rows ends, and the
fingerprint of a cursor interval's source rows.

Built as sqlglot expressions like every statement (see statements.py): identifiers quoted,
cursor values bound by the driver as $start/$end.
"""

from __future__ import annotations

from sqlglot import exp

from tidegate.sql.statements import DUCKDB, Flavor, checksum, column, partition_predicate, table


def _snapshot_text() -> exp.Expr:
    return exp.cast(exp.Anonymous(this="pg_current_snapshot", expressions=[]), "TEXT")


def cursor_extent(source: str, cursor_column: str, snapshot: bool, flavor: Flavor = DUCKDB) -> str:
    """min and max of the cursor column (and the snapshot they were read in, PostgreSQL's
    `pg_current_snapshot()`, in the same statement: what it saw is what that snapshot saw)."""
    values: list[exp.Expr] = [
        exp.Min(this=column(cursor_column)),
        exp.Max(this=column(cursor_column)),
    ]
    if snapshot:
        values.append(_snapshot_text())
    return flavor.render(exp.select(*values).from_(table(source)))


def current_snapshot(flavor: Flavor = DUCKDB) -> str:
    return flavor.render(exp.select(_snapshot_text()))


def batch_end(source: str, cursor_column: str, flavor: Flavor = DUCKDB) -> str:
    """The cursor value of the row at $offset among the rows in ($start, $end], in cursor
    order: where a batch of $offset + 1 rows ends."""
    value = column(cursor_column)
    select = (
        exp.select(value)
        .from_(table(source))
        .where(partition_predicate(cursor_column, False, cursor=True))
        .order_by(value.copy())
        .limit(1)
        .offset(exp.Placeholder(this="offset"))
    )
    return flavor.render(select)


def interval_fingerprint(
    source: str, cursor_column: str, columns: list[str], flavor: Flavor = DUCKDB
) -> str:
    """The checksum of the source rows in the cursor interval ($start, $end]."""
    where = partition_predicate(cursor_column, False, cursor=True)
    return checksum(table(source), columns, where, flavor)
