"""DuckDB statements over the data files of Iceberg tables: the view a published table is read
through, and a table of a window's rows read from files. File paths come from the Iceberg
metadata and reach SQL as quoted string literals; window bounds are bound values."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from tidegate.sql.statements import _sql, column, ident, partition_predicate

# the comment on a view tidegate keeps over an Iceberg table, followed by its metadata file
VIEW_LABEL = "tidegate iceberg: "


def _typed_empty(columns: Sequence[tuple[str, str]]) -> exp.Select:
    """No rows, with the table's columns and types: a table with no data file still has them,
    and a column no file holds yet reads as NULL."""
    return exp.select(
        *[
            exp.alias_(exp.cast(exp.Null(), exp.DataType.build(t, dialect="duckdb")), ident(n))
            for n, t in columns
        ]
    ).where(exp.false())


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
    rows = exp.select(exp.Star()).from_(_files(files))
    return exp.Union(this=empty, expression=rows, distinct=False, by_name=True)


def table_view(
    view: exp.Table,
    columns: Sequence[tuple[str, str]],
    files: Sequence[str],
    label: str,
    temporary: bool = False,
) -> list[str]:
    """The view readers find a published Iceberg table under, over the files of main's
    snapshot, labelled with the metadata file it was read from (so that an unchanged table's
    view is left alone). A read-only handle makes a temporary one."""
    select = files_select(columns, files)
    if temporary:
        scope = exp.Properties(expressions=[exp.TemporaryProperty()])
        return [_sql(exp.Create(this=view, kind="VIEW", expression=select, properties=scope))]
    return [
        _sql(exp.Create(this=view, kind="VIEW", expression=select, replace=True)),
        _sql(exp.Comment(this=view, kind="VIEW", expression=exp.Literal.string(label))),
    ]


def window_of_files(
    target: exp.Table,
    columns: Sequence[tuple[str, str]],
    files: Sequence[str],
    partition_column: str,
    keyed: bool,
) -> str:
    """A table of the files' rows in the window ($start/$end or $key; every row without a
    partition column)."""
    rows = exp.select(*[column(n) for n, _ in columns]).from_(
        exp.Subquery(this=files_select(columns, files), alias=exp.TableAlias(this=ident("f")))
    )
    rows = rows.where(partition_predicate(partition_column, keyed))
    return _sql(exp.Create(this=target, kind="TABLE", expression=rows))


def select_columns(source: exp.Table, names: Sequence[str]) -> str:
    return _sql(exp.select(*[column(n) for n in names]).from_(source))


def labelled_views() -> str:
    """Every persistent view of this database labelled as an Iceberg table's: schema, name and
    label."""
    views = exp.Table(this=exp.Anonymous(this="duckdb_views"))
    return _sql(
        exp.select(column("schema_name"), column("view_name"), column("comment"))
        .from_(views)
        .where(
            exp.and_(
                exp.EQ(this=column("database_name"), expression=exp.func("current_database")),
                exp.Like(this=column("comment"), expression=exp.Literal.string(VIEW_LABEL + "%")),
            )
        )
    )


def drop_view(view: exp.Table) -> str:
    return _sql(exp.Drop(this=view, kind="VIEW", exists=True))
