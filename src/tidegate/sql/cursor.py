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


def table_writers(flavor: Flavor = DUCKDB) -> str:
    """The transaction ids (32-bit, as pg_locks shows them) of the transactions holding a lock
    on the table named by $table (a quoted name, resolved by the session's search_path): every
    transaction that inserted into it and has not ended holds one."""
    relation = exp.alias_(exp.table_("pg_locks"), "r", table=True)
    own = exp.alias_(exp.table_("pg_locks"), "x", table=True)
    joined = exp.and_(
        exp.EQ(
            this=column("virtualtransaction", "x"), expression=column("virtualtransaction", "r")
        ),
        exp.EQ(this=column("locktype", "x"), expression=exp.Literal.string("transactionid")),
        # its own transaction id (a lock it waits for on another's is a ShareLock)
        exp.EQ(this=column("mode", "x"), expression=exp.Literal.string("ExclusiveLock")),
    )
    select = (
        exp.select(exp.cast(column("transactionid", "x"), "TEXT"))
        .distinct()
        .from_(relation)
        .join(own, on=joined)
        .where(
            exp.and_(
                exp.EQ(this=column("locktype", "r"), expression=exp.Literal.string("relation")),
                exp.EQ(
                    this=column("relation", "r"),
                    expression=exp.Anonymous(
                        this="to_regclass",
                        expressions=[exp.cast(exp.Placeholder(this="table"), "TEXT")],
                    ),
                ),
            )
        )
    )
    return flavor.render(select)


def quoted_name(table_name: str, flavor: Flavor = DUCKDB) -> str:
    """A table's name quoted as an identifier: the text value `table_writers` binds."""
    return exp.to_identifier(table_name, quoted=True).sql(dialect=flavor.dialect)


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
