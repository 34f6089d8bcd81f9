"""Column-level lineage of a model's SELECT, with sqlglot.

Which upstream columns a model reads, and what each of its own output columns is made of. Both
fall back to "everything" when the query is beyond what can be traced exactly (a `*` that cannot
be expanded, a set operation): a conservative answer makes a downstream model stale when it might
not need to be, never the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.qualify import qualify

from tidegate.sql.model_sql import DIALECT, normalized


def columns_read(query: exp.Query, tables: Mapping[str, Mapping[str, str]]) -> dict[str, set[str]]:
    """For each table of `tables` (name → column → type) the query reads: the columns it reads
    from it, anywhere in the query (select list, filters, grouping, joins)."""
    read: dict[str, set[str]] = {name: set() for name in tables if _reads_table(query, name)}
    if not read:
        return {}
    try:
        qualified = qualify(
            query.copy(),
            schema={name: dict(columns) for name, columns in tables.items()},
            dialect=DIALECT,
            validate_qualify_columns=True,
        )
    except SqlglotError:
        return {name: set(tables[name]) for name in read}
    aliases = {t.alias_or_name: t.name for t in qualified.find_all(exp.Table)}
    for column in qualified.find_all(exp.Column):
        table = aliases.get(column.table)
        if table in read:
            read[table].add(column.name)
    return read


def column_definitions(query: exp.Query, columns: Sequence[str]) -> dict[str, str]:
    """For each output column: the canonical SQL it is made of — its select expression plus
    everything that decides which rows exist (FROM, joins, filters, grouping, CTEs). Without a
    traceable select list every column gets the whole query."""
    query = normalize_identifiers(query.copy(), dialect=DIALECT)
    whole = normalized(query)
    if not isinstance(query, exp.Select) or _rows_depend_on_select_list(query):
        return dict.fromkeys(columns, whole)
    by_name = {e.alias_or_name: e for e in query.expressions}
    skeleton = query.copy()
    skeleton.set("expressions", [exp.Literal.number(1)])
    rows = normalized(skeleton)
    found = {}
    for name in columns:
        expression = by_name.get(name)
        if expression is None:
            found[name] = whole
            continue
        found[name] = f"{rows}\n{normalized(exp.select(expression.copy()))}"
    return found


def _rows_depend_on_select_list(query: exp.Select) -> bool:
    """Whether the select list decides which rows exist (then no column can be traced alone):
    a `*`, DISTINCT, GROUP BY ALL or by position, or grouping/filtering on a select alias."""
    if query.args.get("distinct") or any(
        isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
        for e in query.expressions
    ):
        return True
    group = query.args.get("group")
    if group is not None and (
        group.args.get("all") or any(isinstance(e, exp.Literal) for e in group.expressions)
    ):
        return True
    renamed = {
        e.alias
        for e in query.expressions
        if isinstance(e, exp.Alias)
        and not (isinstance(e.this, exp.Column) and e.this.name == e.alias)
    }
    clauses = [query.args.get(k) for k in ("group", "having", "qualify")]
    return any(
        column.name in renamed and not column.table
        for clause in clauses
        if clause is not None
        for column in clause.find_all(exp.Column)
    )


def _reads_table(query: exp.Query, name: str) -> bool:
    return any(t.name == name and not t.args.get("db") for t in query.find_all(exp.Table))
