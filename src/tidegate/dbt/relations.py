"""A dbt model's compiled SELECT as a tidegate model's: every relation of a ref or source
renamed to the tidegate model or source that holds it, and, in a partitioned model, every one
that has an event time filtered to the partition window as dbt microbatch filters it
(`$start`/`$end` stay parameters the engine binds): those the model reads itself, not those its
inlined ephemeral models read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from tidegate.sql.model_sql import DIALECT

# how dbt names the CTE of an ephemeral model it inlines into a reader
EPHEMERAL_PREFIX = "__dbt__cte__"


@dataclass(frozen=True)
class Target:
    """What a relation of the compiled query is to tidegate."""

    name: str  # the tidegate model or source holding it
    time_column: str | None  # the event time a partition's window filters it by; None: whole


@dataclass(frozen=True)
class Rewritten:
    sql: str  # in tidegate's dialect
    reads: frozenset[str]  # tidegate names read
    # names with an event time read whole in a windowed query (inside an inlined ephemeral model)
    whole: frozenset[str]
    unknown: tuple[str, ...]  # relations no model, source or seed of the project holds


class CompiledSqlProblem(Exception):
    pass


def rewrite(
    compiled: str,
    dialect: str,
    targets: Mapping[tuple[str, str, str], Target],
    windowed: bool,
    this: tuple[str, str, str] | None = None,
) -> Rewritten:
    """`targets` by (database, schema, identifier), lower case. `this`: a relation to read as
    the staged rows (`this`), for a test's SELECT over the model it checks."""
    try:
        parsed = [s for s in sqlglot.parse(compiled, dialect=dialect) if s is not None]
    except SqlglotError as error:
        raise CompiledSqlProblem(f"does not parse: {str(error).splitlines()[0]}") from None
    if len(parsed) != 1 or not isinstance(parsed[0], exp.Query):
        raise CompiledSqlProblem("is not one SELECT")
    query = parsed[0]
    by_schema = {(schema, name): target for (_, schema, name), target in targets.items()}
    reads: set[str] = set()
    whole: set[str] = set()
    unknown: list[str] = []

    def swap(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Table) or not node.args.get("db"):
            return node
        key = (node.catalog.lower(), node.db.lower(), node.name.lower())
        alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
        if this is not None and (key == this or (not key[0] and key[1:] == this[1:])):
            return exp.Table(this=exp.to_identifier("this"), alias=alias)
        target = targets.get(key) if key[0] else by_schema.get(key[1:])
        if target is None:
            unknown.append(".".join(p for p in key if p))
            return node
        reads.add(target.name)
        table = exp.Table(this=exp.to_identifier(target.name))
        if not windowed or target.time_column is None or _in_ephemeral(node):
            if windowed and target.time_column is not None:
                whole.add(target.name)
            table.set("alias", alias)
            return table
        column = exp.column(target.time_column, quoted=True)
        window = exp.and_(
            exp.GTE(this=column, expression=exp.Placeholder(this="start")),
            exp.LT(this=column.copy(), expression=exp.Placeholder(this="end")),
        )
        return exp.Subquery(this=exp.select("*").from_(table).where(window), alias=alias)

    rewritten = query.transform(swap)
    return Rewritten(
        rewritten.sql(dialect=DIALECT, comments=False),
        frozenset(reads),
        frozenset(whole),
        tuple(sorted(set(unknown))),
    )


def _in_ephemeral(node: exp.Expr) -> bool:
    """Whether a relation is read by an ephemeral model dbt inlined as a CTE: dbt microbatch
    filters only the relations the model itself reads, so tidegate does too."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.CTE) and parent.alias.startswith(EPHEMERAL_PREFIX):
            return True
        parent = parent.parent
    return False
