"""DuckDB statements over the data files of Iceberg tables: the view a published table is read
through, and a table of a window's rows read from files. File paths come from the Iceberg
metadata and reach SQL as quoted string literals; window bounds are bound values."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from tidegate.sql.statements import META_SCHEMA, _sql, column, ident, partition_predicate


def _typed_empty(columns: Sequence[tuple[str, str]]) -> exp.Select:
    """No rows, with the table's columns and types: a table with no data file still has them,
    and a column no file holds yet reads as NULL."""
    return exp.select(
        *[
            exp.alias_(exp.cast(exp.Null(), exp.DataType.build(t, dialect="duckdb")), ident(n))
            for n, t in columns
        ]
    ).where(exp.false(), copy=False)


def _files(files: Sequence[str]) -> exp.Table:
    paths = exp.Array(expressions=[exp.Literal.string(f) for f in files])
    # Iceberg's folders look like Hive partitions (`day=2025-01-01`): the values are in the
    # files, never read from the path
    options = [
        exp.EQ(this=exp.column(name), expression=value)
        for name, value in (("union_by_name", exp.true()), ("hive_partitioning", exp.false()))
    ]
    return exp.Table(this=exp.Anonymous(this="read_parquet", expressions=[paths, *options]))


def files_select(columns: Sequence[tuple[str, str]], files: Sequence[str]) -> exp.Query:
    """Every row of the files, with the table's columns in its order."""
    empty = _typed_empty(columns)
    if not files:
        return empty
    rows = exp.select(exp.Star()).from_(_files(files), copy=False)
    return exp.Union(this=empty, expression=rows, distinct=False, by_name=True)


def mirror_table(
    target: exp.Table, columns: Sequence[tuple[str, str]], files: Sequence[str]
) -> str:
    """The DuckDB copy of a published Iceberg table, made from the files of main's snapshot."""
    select = files_select(columns, files)
    return _sql(exp.Create(this=target, kind="TABLE", expression=select, replace=True))


def files_view(view: exp.Table, columns: Sequence[tuple[str, str]], files: Sequence[str]) -> str:
    """A temporary view over the files of main's snapshot: what a read-only handle reads
    where its copy is not the table's current state."""
    scope = exp.Properties(expressions=[exp.TemporaryProperty()])
    select = files_select(columns, files)
    return _sql(exp.Create(this=view, kind="VIEW", expression=select, properties=scope))


def source_view(
    view: exp.Table,
    columns: Sequence[tuple[str, str]],
    files: Sequence[str],
    label: str,
    temporary: bool = False,
) -> list[str]:
    """The view an Iceberg source is read through, over the files of its table's main snapshot,
    labelled with the metadata file it was made from (so that it is remade when the table
    changed). A temporary one (a read-only handle's) lives as long as the connection."""
    if temporary:
        return [files_view(view, columns, files)]
    select = files_select(columns, files)
    return [
        _sql(exp.Create(this=view, kind="VIEW", expression=select, replace=True)),
        _sql(exp.Comment(this=view, kind="VIEW", expression=exp.Literal.string(label))),
    ]


def source_label(identifier: str, metadata_location: str) -> str:
    return f"tidegate iceberg source: {identifier} {metadata_location}"


MIRRORS = exp.Table(this=ident("iceberg_mirrors"), db=ident(META_SCHEMA))


def mirrors_ddl() -> str:
    """What each copy was made from: a table's schema and name, and the Iceberg metadata file
    of the state it holds."""
    return (
        f"CREATE TABLE IF NOT EXISTS {_sql(MIRRORS)} (schema_name VARCHAR NOT NULL, "
        "table_name VARCHAR NOT NULL, metadata_location VARCHAR NOT NULL, "
        "PRIMARY KEY (schema_name, table_name))"
    )


def select_mirrors() -> str:
    return f"SELECT schema_name, table_name, metadata_location FROM {_sql(MIRRORS)}"


def count_mirrors() -> str:
    return f"SELECT count(*) FROM {_sql(MIRRORS)}"


def set_mirror() -> str:
    """Record a copy's state (three positional values: schema, name, metadata file)."""
    return f"INSERT OR REPLACE INTO {_sql(MIRRORS)} VALUES (?, ?, ?)"


def forget_mirror() -> str:
    return f"DELETE FROM {_sql(MIRRORS)} WHERE schema_name = ? AND table_name = ?"


def window_of_files(
    target: exp.Table,
    columns: Sequence[tuple[str, str]],
    files: Sequence[str],
    partition_column: str,
    keyed: bool,
) -> str:
    """A table of the files' rows in the window ($start/$end or $key; every row without a
    partition column)."""
    # built in place (copy=False): a copy per builder call would copy every file's path
    rows = exp.select(*[column(n) for n, _ in columns]).from_(
        exp.Subquery(this=files_select(columns, files), alias=exp.TableAlias(this=ident("f"))),
        copy=False,
    )
    rows = rows.where(partition_predicate(partition_column, keyed), copy=False)
    return _sql(exp.Create(this=target, kind="TABLE", expression=rows))


def select_columns(source: exp.Table, names: Sequence[str], ordered_by: str | None = None) -> str:
    """The columns of every row (in the order of `ordered_by`, NULLs last, when given)."""
    select = exp.select(*[column(n) for n in names]).from_(source)
    if ordered_by:
        select = select.order_by(exp.Ordered(this=column(ordered_by), nulls_first=False))
    return _sql(select)


def drop_view(view: exp.Table) -> str:
    return _sql(exp.Drop(this=view, kind="VIEW", exists=True))
