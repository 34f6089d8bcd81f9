"""Statements of cursor models: the cursor's extent in its source (with the transactions open
when it was read, where transactions commit out of order), where a batch of at most N rows
ends, and the fingerprint of a cursor interval's source rows.

Built as sqlglot expressions like every statement (see statements.py): identifiers quoted,
cursor values bound by the driver as $start/$end.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from tidegate.sql.statements import DUCKDB, Flavor, checksum, column, partition_predicate, table

# The transactions open now, as pg_locks lists them (every transaction holds the lock of its
# own virtual transaction id from its first statement, a prepared one its xid's): all but this
# session's, tidegate's own sessions (which never write a source), sessions of other databases
# and maintenance processes that write no rows. A session whose details are hidden from this
# role counts (it may write the source).
_OPEN_TRANSACTIONS = """
SELECT string_agg(DISTINCT l.virtualtransaction, ',')
FROM pg_locks AS l LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.virtualtransaction IS NOT NULL
  AND l.pid IS DISTINCT FROM pg_backend_pid()
  AND NOT coalesce(a.application_name = 'tidegate', FALSE)
  AND NOT coalesce(a.datname <> current_database(), FALSE)
  AND NOT coalesce(
    a.backend_type IN ('autovacuum launcher', 'autovacuum worker', 'walsender', 'parallel worker'),
    FALSE)
"""


def _open_transactions() -> exp.Expr:
    return exp.Subquery(this=sqlglot.parse_one(_OPEN_TRANSACTIONS, dialect="postgres"))


def cursor_extent(
    source: str, cursor_column: str, transactions: bool, flavor: Flavor = DUCKDB
) -> str:
    """min and max of the cursor column and, with `transactions` (PostgreSQL), the transactions
    open when they were read, in the same statement: it lists them after its snapshot was
    taken, so every transaction whose rows that snapshot could not see and that had not ended
    is among them."""
    values: list[exp.Expr] = [
        exp.Min(this=column(cursor_column)),
        exp.Max(this=column(cursor_column)),
    ]
    if transactions:
        values.append(_open_transactions())
    return flavor.render(exp.select(*values).from_(table(source)))


def open_transactions(flavor: Flavor = DUCKDB) -> str:
    """The transactions open now (see cursor_extent), as `backend/local,...` or NULL."""
    return flavor.render(exp.select(_open_transactions()))


# Whether a single-column primary key or unique constraint (index) holds the cursor column:
# then no row committed later can share the newest value. Partial and expression indexes do
# not count.
_UNIQUE_DUCKDB = """
SELECT count(*) FROM duckdb_constraints()
WHERE constraint_type IN ('PRIMARY KEY', 'UNIQUE') AND table_name = ?
  AND len(constraint_column_names) = 1 AND constraint_column_names[1] = ?
"""
_UNIQUE_POSTGRES = """
SELECT count(*) FROM pg_index AS i
JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE i.indrelid = to_regclass(%(table)s) AND i.indisunique AND i.indnkeyatts = 1
  AND i.indpred IS NULL AND i.indexprs IS NULL AND a.attname = %(column)s
"""


def unique_column(flavor: Flavor = DUCKDB) -> str:
    """How many unique constraints hold exactly the column: DuckDB binds (table, column),
    PostgreSQL $table (a quoted name, resolved by the search_path) and $column."""
    return _UNIQUE_DUCKDB if flavor is DUCKDB else _UNIQUE_POSTGRES


def quoted_name(table_name: str, flavor: Flavor = DUCKDB) -> str:
    """A table's name quoted as an identifier, as `unique_column` binds it on PostgreSQL."""
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
    source: str,
    cursor_column: str,
    columns: list[str],
    aggregates: Sequence[str],
    flavor: Flavor = DUCKDB,
) -> str:
    """The checksum of the source rows in the cursor interval ($start, $end], and the given
    aggregates over them (a reconciliation's source side)."""
    where = partition_predicate(cursor_column, False, cursor=True)
    return checksum(table(source), columns, where, flavor, aggregates)
