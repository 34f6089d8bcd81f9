"""How deeply SQL may nest, and the recursion room that takes.

sqlglot parses, walks and writes SQL by recursion. Measured with sqlglot 30 on CPython 3.11:
parsing takes up to 25 Python frames per level of the expression tree (a function call or a
parenthesis; a CASE takes 19 for its two levels), writing it out, qualifying or normalizing it
fewer than 6. Python's default limit of 1,000 frames so stops a model at about 40 nested
parentheses. Every SQL text a project holds is refused past MAX_DEPTH levels, and the
interpreter is given the frames that depth takes, wherever tidegate parses or writes SQL again
(the executor parses a model's rendered SELECT once more, wrapped in its own statements).

The limit is raised once for the process and never lowered: it is shared by every thread, so
lowering it after one parse could cut another thread's parse short. Raising it is safe only as
far as the C stack holds: on CPython 3.11 a Python call does not recurse in C, and the frames
cost tens of bytes each (500 nested function calls, 12,500 frames, parse in a thread of 1 MiB;
1,000 overflow it). RECURSION_LIMIT, 7,000 frames, so stays well inside the 8 MiB of a main
thread or of a Linux thread. SQL nested past the limit raises RecursionError, which the parsing
functions here and in model_sql.py turn into a refusal of the SQL.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.tokenizer_core import Token, TokenType

# 50 nested parentheses (a plausible model) is 55 levels; 60 nested CASEs is 125
MAX_DEPTH = 200
FRAMES_PER_LEVEL = 25
# the frames below a parse (the command line, an executor thread) and the statements the
# executor wraps around a model's SELECT
HEADROOM_FRAMES = 2_000
RECURSION_LIMIT = MAX_DEPTH * FRAMES_PER_LEVEL + HEADROOM_FRAMES

TOO_DEEP = (
    f"nested more than {MAX_DEPTH} levels deep (merge nested CASEs into one CASE WHEN … WHEN …, "
    "or move parts into CTEs)"
)

_OPENING = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE})
_CLOSING = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END})


class TooDeep(SqlglotError):
    """SQL nested more than MAX_DEPTH levels deep."""

    def __init__(self) -> None:
        super().__init__(TOO_DEEP)


def make_room() -> None:
    """Give the interpreter the recursion room SQL nested MAX_DEPTH deep takes; never lower
    the limit (see the module's docstring)."""
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)


def too_deep(expression: exp.Expr) -> bool:
    return past_depth(expression) is not None


def past_depth(expression: exp.Expr) -> exp.Expr | None:
    """The first node of the expression tree found more than MAX_DEPTH levels deep (None: the
    tree is not that deep), walked without recursion."""
    pending: list[tuple[exp.Expr, int]] = [(expression, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_DEPTH:
            return node
        pending.extend((child, depth + 1) for child in node.iter_expressions())
    return None


def node_line(sql: str, node: exp.Expr) -> int | None:
    """The line (from 1) of `sql` where `node` is written, from the position the parser kept
    on the first name or literal in it, or else in what holds it."""
    around: exp.Expr | None = node
    while around is not None:
        for found in around.walk():
            start = found.meta.get("start")
            if isinstance(start, int):
                return sql[:start].count("\n") + 1
        around = around.parent
    return None


def bracket_depth(tokens: list[Token]) -> int:
    """How deeply parentheses, brackets, braces and CASEs nest among `tokens`: a bound below
    the depth of the tree they parse into, known before parsing."""
    depth = deepest = 0
    for token in tokens:
        if token.token_type in _OPENING:
            depth += 1
            deepest = max(deepest, depth)
        elif token.token_type in _CLOSING:
            depth -= 1
    return deepest


def deepest_line(sql: str, tokens: list[Token] | None = None) -> int:
    """The line (from 1) where `sql` nests deepest in parentheses, brackets, braces and CASEs:
    where to look when it is nested too deeply. Line 1 when it cannot be told."""
    if tokens is None:
        try:
            tokens = sqlglot.tokenize(sql, read="duckdb")
        except SqlglotError:
            return 1
    depth, deepest, line = 0, 0, 1
    for token in tokens:
        if token.token_type in _OPENING:
            depth += 1
            if depth > deepest:
                # from the offset: sqlglot's token.line drifts after a `$name` parameter
                deepest, line = depth, sql[: token.start].count("\n") + 1
        elif token.token_type in _CLOSING:
            depth -= 1
    return line


def parse_one(sql: str, dialect: str, **opts: Any) -> exp.Expr:
    """sqlglot.parse_one for SQL a project declares (a check's expression, an update's value),
    with every way the parser can fail on it a SqlglotError: TooDeep past MAX_DEPTH, and
    whatever else it raises on odd text a ParseError (the text's problem, not a crash)."""
    parsed: exp.Expr = _guarded(
        sql, dialect, lambda: sqlglot.parse_one(sql, dialect=dialect, **opts)
    )
    _refuse_deep([parsed])
    return parsed


def parse(sql: str, dialect: str, **opts: Any) -> list[exp.Expr | None]:
    """sqlglot.parse (any number of statements), failing as parse_one does."""
    parsed = _guarded(sql, dialect, lambda: sqlglot.parse(sql, dialect=dialect, **opts))
    _refuse_deep(parsed)
    return parsed


Parsed = TypeVar("Parsed")


def _guarded(sql: str, dialect: str, parse: Callable[[], Parsed]) -> Parsed:
    # refused before parsing: the parser would recurse through every level first
    if bracket_depth(sqlglot.tokenize(sql, read=dialect)) > MAX_DEPTH:
        raise TooDeep()
    try:
        return parse()
    except SqlglotError:
        raise
    except RecursionError:
        raise TooDeep() from None
    except Exception as error:
        raise ParseError(f"{type(error).__name__}: {error}") from None


def _refuse_deep(parsed: Sequence[exp.Expr | None]) -> None:
    if any(statement is not None and too_deep(statement) for statement in parsed):
        raise TooDeep()
