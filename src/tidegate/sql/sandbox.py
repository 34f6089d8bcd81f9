"""What SQL a project may run: rows in, rows out, nothing else.

A model's SELECT (and a check's or an update's expression) reads the tables it names, so that
lineage, fingerprints and taints see every input. A table function reads what its arguments
name — a file, a table given as a string, a query given as text — and some functions change the
engine's settings or act on the server (write files, large objects, connections to other
databases). So in FROM only the row generators below are allowed, and anywhere in the query the
functions that reach outside the data are refused, by name, on the parsed tree at `build`,
whatever the warehouse engine: the tree is the project dialect's before it is translated.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

# the row generators a model may read FROM: they compute rows, they read nothing
TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "generate_subscripts"})

# name patterns of functions refused anywhere, each with what to do instead
_REFUSED: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"read_\w+|\w+_scan|glob|sniff_csv|parquet_\w+|iceberg_\w+|delta_\w+|"
            r"pg_(read|ls|stat_file)\w*|lo_\w+|sqlite_\w+|postgres_\w+|mysql_\w+|"
            r"dblink\w*|input_file\w*"
        ),
        "declare files as a source (path = ... under [sources]) and name it in FROM",
    ),
    (
        re.compile(
            r"query|query_table|query_to_\w+|table_to_\w+|cursor_to_\w+|"
            r"schema_to_\w+|database_to_\w+"
        ),
        "name the table in FROM, so that lineage sees what the model reads",
    ),
    (
        re.compile(
            r"enable_\w+|disable_\w+|\w+_profiling|\w+_logging|set_config|current_setting|"
            r"getenv|duckdb_\w+|pragma_\w+|which_secret|checkpoint|force_checkpoint|"
            r"load_extension|install_extension"
        ),
        "the engine's settings are not for a project's SQL to read or change",
    ),
    (
        re.compile(
            # pg_typeof reads a value's type and pg_sleep only costs time, as a slow query does
            r"pg_(?!typeof$|sleep$|sleep_for$|sleep_until$)\w+|"
            r"nextval|setval|currval|lastval|txid_\w+|reflect|try_reflect|"
            r"java_method"
        ),
        "it acts on the server or the session, outside the query's rows",
    ),
)


@dataclass(frozen=True)
class Refusal:
    """A call SQL may not make: its name, why, and where (an offset into the text, or None)."""

    function: str
    advice: str
    offset: int | None

    def message(self, what: str = "a model") -> str:
        return f"function {self.function} is not allowed in {what}: {self.advice}"

    def line(self, text: str) -> int | None:
        return None if self.offset is None else text[: self.offset].count("\n") + 1


def refused_call(tree: exp.Expr) -> Refusal | None:
    """The first call in `tree` that SQL of a project may not make, or None."""
    for node in tree.walk():
        if not isinstance(node, exp.Func):
            continue
        name = function_name(node)
        offset = node.meta.get("start")
        start = int(offset) if offset is not None else None
        for pattern, advice in _REFUSED:
            if pattern.fullmatch(name):
                return Refusal(name, advice, start)
        if isinstance(node.parent, exp.Table | exp.Lateral) and name not in TABLE_FUNCTIONS:
            allowed = ", ".join(sorted(TABLE_FUNCTIONS))
            return Refusal(name, f"the table functions a model may read are {allowed}", start)
    return None


def function_name(node: exp.Func) -> str:
    """The name the SQL spells (sqlglot's canonical name for the functions it knows)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()


@functools.lru_cache(maxsize=64)
def stored_refusal(sql: str, dialect: str = "duckdb") -> str | None:
    """Why a version's stored SQL may not run (None when it may): a version recorded before
    these rules, or a rollback to one, is held to them when it runs, not only when it is built."""
    try:
        tree = sqlglot.parse_one(sql, dialect=dialect)
    except (SqlglotError, RecursionError):
        return None  # the engine's own parser reports what does not parse
    refused = refused_call(tree)
    return None if refused is None else refused.message("a model")
