"""PostgreSQL's spelling of tidegate's statements, and the statements only PostgreSQL runs.

The shared builders (statements.py, write_modes.py, diff.py) take `POSTGRES` as their flavor:
the same sqlglot expressions, rendered in sqlglot's `postgres` dialect for psycopg. Models are
written in the project dialect (DuckDB's) and transpiled here; their `$start`/`$end`/`$key`
become psycopg's `%(start)s` placeholders, bound by the driver, never pasted into the text.
"""

from __future__ import annotations

import functools
import hashlib
import re
import secrets
from collections.abc import Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from tidegate.domain.model import Column
from tidegate.sql.model_sql import SqlProblem, parse_type
from tidegate.sql.statements import (
    DIALECT,
    MARKER_COLUMNS,
    MARKERS,
    META_SCHEMA,
    Flavor,
    column,
    days_since_epoch,
    ident,
    row_hash,
    table,
)

POSTGRES_DIALECT = "postgres"
# Staging: UNLOGGED tables (no WAL: cheap, and never replicated) in a schema no reader of
# published tables looks at. A crash leaves them; a writer drops them when it starts.
STAGING_SCHEMA = "_tidegate_staging"
# PostgreSQL cuts identifiers at 63 bytes; a longer staging name is shortened with a digest so
# that two names never end up as the same table.
MAX_IDENTIFIER = 63
# The writer's session-level advisory lock: the two-key form ("tide", "gate"), a key space of
# its own, per database (advisory locks are local to the database they are taken in).
WRITER_LOCK = (0x74696465, 0x67617465)
# held while tidegate's own tables are created: workers starting together create them once
PREPARE_LOCK = (0x74696465, 0x70726570)
TWO_TO_64 = 2**64

# Placeholders become opaque words while the statement is rendered, so that every other `%`
# (an operator, a LIKE pattern, a hostile identifier) can be doubled for psycopg afterwards.
_NONCE = secrets.token_hex(12)
_SLOT = re.compile(rf"tidegate_{_NONCE}_(\d+)_")


def render(expression: exp.Expr) -> str:
    """The statement as psycopg runs it: `%(name)s` for a named placeholder, `%s` for a
    positional one, every other `%` doubled. Run it with parameters (a mapping, or a sequence
    for positional ones; empty when it has none), so that psycopg reads the doubled `%`."""
    names: list[str] = []

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder):
            named = node.args.get("this")
            names.append("" if named is None else exp.to_identifier(named).name)
            return exp.var(f"tidegate_{_NONCE}_{len(names) - 1}_")
        return node

    text = expression.copy().transform(swap).sql(dialect=POSTGRES_DIALECT, comments=False)
    text = text.replace("%", "%%")

    def placeholder(found: re.Match[str]) -> str:
        name = names[int(found.group(1))]
        return f"%({name})s" if name else "%s"

    return _SLOT.sub(placeholder, text)


def _hash64(hex_prefix: exp.Expr) -> exp.Expr:
    """16 hex digits → the signed 64-bit integer with those bits (PostgreSQL has no unsigned
    type): the same value as DuckDB's UBIGINT modulo 2^64, which is all a digest keeps."""
    as_bits = exp.cast(
        exp.DPipe(this=exp.Literal.string("x"), expression=hex_prefix),
        exp.DataType.build("BIT(64)", dialect=POSTGRES_DIALECT),
    )
    return exp.cast(as_bits, exp.DataType.Type.BIGINT)


def _digest(hashed: exp.Expr) -> exp.Expr:
    """sum(hash) mod 2^64 in [0, 2^64): the sum of BIGINTs is an exact NUMERIC, and the
    remainder of a negative sum is negative, so it is taken twice."""
    modulus = exp.Literal.number(TWO_TO_64)
    total = exp.Coalesce(this=exp.Sum(this=hashed), expressions=[exp.Literal.number(0)])
    once = exp.Mod(this=total, expression=modulus)
    shifted = exp.Add(this=exp.paren(once), expression=modulus.copy())
    return exp.Mod(this=exp.paren(shifted), expression=modulus.copy())


def _native_hash(values: Sequence[exp.Expr]) -> exp.Expr:
    """Input fingerprints hash the rows like checksums do: PostgreSQL's own record hashes do
    not cover every type (json has none), and this one does."""
    texts = [exp.cast(value.copy(), exp.DataType.Type.VARCHAR) for value in values]
    return row_hash([], texts, POSTGRES)


def _same_value(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    """Equal or both NULL, as equalities a FULL OUTER JOIN can hash (PostgreSQL refuses IS NOT
    DISTINCT FROM there): NULL on both sides or neither, and the same text."""
    both_null = exp.EQ(
        this=exp.paren(exp.Is(this=left.copy(), expression=exp.Null())),
        expression=exp.paren(exp.Is(this=right.copy(), expression=exp.Null())),
    )

    def text(value: exp.Expr) -> exp.Expr:
        as_text = exp.cast(value.copy(), exp.DataType.Type.VARCHAR)
        return exp.Coalesce(this=as_text, expressions=[exp.Literal.string("")])

    return exp.and_(both_null, exp.EQ(this=text(left), expression=text(right)))


POSTGRES = Flavor(
    dialect=POSTGRES_DIALECT,
    render=render,
    hash64=_hash64,
    digest=_digest,
    native_hash=_native_hash,
    position=lambda values, value: exp.Anonymous(
        this="array_position", expressions=[values, value]
    ),
    same_value=_same_value,
    day_number=days_since_epoch,
)


# --- staging -------------------------------------------------------------------------------


def staging_name(name: str) -> str:
    """The table a staging name is kept in: itself, or when too long for PostgreSQL a prefix
    and a digest of the whole name."""
    if len(name.encode()) <= MAX_IDENTIFIER:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{name.encode()[:40].decode(errors='ignore')}_{digest}"


def staged(name: str) -> exp.Table:
    return table(staging_name(name), STAGING_SCHEMA)


@functools.lru_cache(maxsize=64)
def _parsed(query_sql: str) -> exp.Expr:
    # A model's query is the same for every partition: parse it once.
    return sqlglot.parse_one(query_sql, dialect=DIALECT).transform(_group_by_all)


def _group_by_all(node: exp.Expr) -> exp.Expr:
    """DuckDB's GROUP BY ALL, which PostgreSQL lacks: the select list's expressions that hold
    no aggregate (constants need no grouping)."""
    if isinstance(node, exp.Select):
        group = node.args.get("group")
        if group is not None and group.args.get("all"):
            keys = [
                e.unalias().copy()
                for e in node.expressions
                if e.find(exp.AggFunc) is None and not isinstance(e.unalias(), exp.Literal)
            ]
            node.set("group", exp.Group(expressions=keys) if keys else None)
    return node


def create_staging(target: exp.Table, query_sql: str) -> str:
    """An UNLOGGED table holding what a model's query (project dialect) returns."""
    return render(
        exp.Create(
            kind="TABLE",
            this=target,
            expression=_parsed(query_sql).copy(),
            properties=exp.Properties(expressions=[exp.UnloggedProperty()]),
        )
    )


def probe_query(query_sql: str) -> str:
    """The query (project dialect) without its rows: its columns come back in the result's
    description, planned but not run."""
    inner = exp.Subquery(
        this=_parsed(query_sql).copy(), alias=exp.TableAlias(this=ident("tidegate:query"))
    )
    return render(exp.select(exp.Star()).from_(inner).limit(0))


def tables_in_schema() -> str:
    """Tables of one schema (one positional value), by name."""
    info = table("tables", "information_schema")
    return render(
        exp.select(column("table_name"))
        .from_(info)
        .where(exp.EQ(this=column("table_schema"), expression=exp.Placeholder()))
        .order_by(column("table_name"))
    )


def table_columns() -> str:
    """Columns of a table, bound by its schema and name (two positional values): name, the
    type as PostgreSQL spells it (with its precision) and whether it may hold NULLs."""
    attribute = exp.Table(this=ident("pg_attribute"), db=ident("pg_catalog"), alias="a")
    relation = exp.Table(this=ident("pg_class"), db=ident("pg_catalog"), alias="c")
    namespace = exp.Table(this=ident("pg_namespace"), db=ident("pg_catalog"), alias="n")
    kinds = [exp.Literal.string(k) for k in ("r", "p", "v", "m", "f")]
    select = (
        exp.select(
            exp.column("attname", "a"),
            exp.Anonymous(
                this="format_type",
                expressions=[exp.column("atttypid", "a"), exp.column("atttypmod", "a")],
            ),
            exp.not_(exp.column("attnotnull", "a")),
        )
        .from_(attribute)
        .join(
            relation, on=exp.EQ(this=exp.column("oid", "c"), expression=exp.column("attrelid", "a"))
        )
        .join(
            namespace,
            on=exp.EQ(this=exp.column("oid", "n"), expression=exp.column("relnamespace", "c")),
        )
        .where(
            exp.and_(
                exp.EQ(this=exp.column("nspname", "n"), expression=exp.Placeholder()),
                exp.EQ(this=exp.column("relname", "c"), expression=exp.Placeholder()),
                exp.column("relkind", "c").isin(*kinds),
                exp.GT(this=exp.column("attnum", "a"), expression=exp.Literal.number(0)),
                exp.not_(exp.column("attisdropped", "a")),
            )
        )
        .order_by(exp.column("attnum", "a"))
    )
    return render(select)


def canonical_type(postgres_type: str) -> str:
    """A PostgreSQL type (as format_type spells it) in the project's spelling, the one
    contracts are written in; raises SqlProblem for a type tidegate cannot name."""
    try:
        parsed = sqlglot.parse_one(postgres_type, into=exp.DataType, read=POSTGRES_DIALECT)
    except (SqlglotError, ValueError):
        raise SqlProblem(f"unknown column type {postgres_type!r}") from None
    if parsed.this == exp.DataType.Type.DECIMAL and not parsed.expressions:
        # NUMERIC without a precision holds any number: no contract type says that
        return "NUMERIC"
    return parse_type(parsed.sql(dialect=DIALECT))


# --- the session ---------------------------------------------------------------------------


def set_setting() -> str:
    """Set a session setting (name, value: two positional values)."""
    return render(
        exp.select(
            exp.Anonymous(
                this="set_config",
                expressions=[exp.Placeholder(), exp.Placeholder(), exp.false()],
            )
        )
    )


def set_local_setting() -> str:
    """Set a setting for the rest of the transaction only (SET LOCAL; name, value)."""
    return render(
        exp.select(
            exp.Anonymous(
                this="set_config",
                expressions=[exp.Placeholder(), exp.Placeholder(), exp.true()],
            )
        )
    )


def search_path(schema: str) -> str:
    """The value of search_path that makes unqualified names read `schema` (and only it)."""
    return ident(schema).sql(dialect=POSTGRES_DIALECT)


def try_writer_lock(shared: bool = False) -> str:
    """The writer's lock, or its shared form: workers of a distributed run write together, and
    hold it shared so that no single writer runs beside them."""
    return render(
        exp.select(_lock_call("pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"))
    )


def hold_table() -> str:
    """A transaction-level advisory lock on a published table's name (one positional value):
    writers that share the warehouse publish into one table one at a time."""
    hashed = exp.Anonymous(
        this="hashtextextended", expressions=[exp.Placeholder(), exp.Literal.number(0)]
    )
    return render(exp.select(exp.Anonymous(this="pg_advisory_xact_lock", expressions=[hashed])))


def release_writer_lock() -> str:
    return render(exp.select(_lock_call("pg_advisory_unlock")))


def hold_prepare() -> str:
    return render(exp.select(_lock_call("pg_advisory_xact_lock", PREPARE_LOCK)))


def _lock_call(function: str, keys: tuple[int, int] = WRITER_LOCK) -> exp.Expr:
    return exp.Anonymous(this=function, expressions=[exp.Literal.number(k) for k in keys])


def server_version() -> str:
    return render(
        exp.select(
            exp.Anonymous(
                this="current_setting", expressions=[exp.Literal.string("server_version")]
            )
        )
    )


def create_staging_table(target: exp.Table, columns: Sequence[Column]) -> str:
    """An empty UNLOGGED staging table of the given columns (project dialect types)."""
    definitions: list[exp.Expr] = [
        exp.ColumnDef(this=ident(c.name), kind=exp.DataType.build(c.type, dialect=DIALECT))
        for c in columns
    ]
    return render(
        exp.Create(
            kind="TABLE",
            this=exp.Schema(this=target, expressions=definitions),
            properties=exp.Properties(expressions=[exp.UnloggedProperty()]),
        )
    )


def copy_in(target: exp.Table, columns: Sequence[str]) -> str:
    """COPY rows into a table from the client (psycopg's copy protocol), by column name."""
    return render(
        exp.Copy(
            this=exp.Schema(this=target, expressions=[ident(n) for n in columns]),
            kind=True,
            files=[exp.to_identifier("STDIN")],
        )
    )


def insert_markers() -> str:
    """Insert every marker of a publish in one statement: each named parameter is bound to the
    list of that column's values (cast to a typed array: psycopg sends lists of text untyped),
    and the arrays are unnested side by side."""
    target = table(MARKERS, META_SCHEMA)
    typed = {"partition_start": "BIGINT[]", "partition_end": "BIGINT[]"}
    return render(
        exp.Insert(
            this=exp.Schema(this=target, expressions=[ident(n) for n in MARKER_COLUMNS]),
            expression=exp.select(
                *[
                    exp.Unnest(
                        expressions=[
                            exp.cast(
                                exp.Placeholder(this=n),
                                exp.DataType.build(typed.get(n, "TEXT[]"), dialect=DIALECT),
                            )
                        ]
                    )
                    for n in MARKER_COLUMNS
                ]
            ),
        )
    )


def schema_exists() -> str:
    """One row when a schema (one positional value) exists."""
    namespace = exp.Table(this=ident("pg_namespace"), db=ident("pg_catalog"))
    return render(
        exp.select(exp.Literal.number(1))
        .from_(namespace)
        .where(exp.EQ(this=column("nspname"), expression=exp.Placeholder()))
    )
