"""Reading a model's SELECT: parsing, upstream inference, normalization and rendering."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.tokenizer_core import Token, TokenType

from tidegate.sql import nesting
from tidegate.sql.sandbox import refused_call

DIALECT = "duckdb"
BOUND_PARAMETERS = frozenset({"start", "end", "key"})
# Statements that write or change a session, wherever they sit in a model's SELECT: a
# data-modifying CTE (`WITH gone AS (DELETE … RETURNING *) SELECT …`) is a SELECT to the parser,
# and PostgreSQL runs it.
WRITES: tuple[type[exp.Expr], ...] = (
    exp.Insert,
    exp.Delete,
    exp.Update,
    exp.Merge,
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.TruncateTable,
    exp.Copy,
    exp.Attach,
    exp.Detach,
    exp.Pragma,
    exp.Command,
    exp.Set,
    exp.Use,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
)


class SqlProblem(Exception):
    """A problem in a model's SQL; `line` counts from the first line of the SQL text."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def parse_query(sql: str) -> exp.Query:
    """Parse exactly one SELECT (or set operation); anything that writes, and any call that
    reads or acts outside the tables it names (sql/sandbox.py), is refused."""
    statements = _statements(sql)
    if len(statements) != 1:
        raise SqlProblem(
            f"a model holds exactly one SELECT, found {len(statements)} statements",
            _statement_line(sql, 1),
        )
    statement = statements[0]
    if not isinstance(statement, exp.Query):
        raise SqlProblem(
            "a model is one SELECT statement; this SQL is not a SELECT", _statement_line(sql, 0)
        )
    write = statement.find(*WRITES)
    if write is not None:
        raise SqlProblem(
            f"a model only reads; this SELECT holds a {write.key.upper()} that would write",
            _statement_line(sql, 0),
        )
    refused = refused_call(statement)
    if refused is not None:
        raise SqlProblem(refused.message(), refused.line(sql))
    return statement


def _statements(sql: str) -> list[exp.Expr]:
    """The statements of `sql`, or SqlProblem with the line at fault for whatever stops the
    parser: SQL nested past what it can take included, and any failure of the parser on odd
    text, which is the text's problem to report, not a crash."""
    dialect = Dialect.get_or_raise(DIALECT)
    tokens = _tokens(dialect, sql)
    # refused before parsing: the parser would recurse through every level first
    if nesting.bracket_depth(tokens) > nesting.MAX_DEPTH:
        raise SqlProblem(f"SQL is {nesting.TOO_DEEP}", nesting.deepest_line(sql, tokens))
    try:
        # the whole text before the error as context: sqlglot's token.line drifts after `$name`
        parsed = dialect.parser(error_message_context=len(sql)).parse(tokens, sql)
    except ParseError as error:
        first = error.errors[0] if error.errors else {}
        before = first.get("start_context")
        line = before.count("\n") + 1 if isinstance(before, str) else first.get("line")
        raise SqlProblem(f"SQL does not parse: {parse_problem(error)}", line) from None
    except RecursionError:
        raise SqlProblem(f"SQL is {nesting.TOO_DEEP}", nesting.deepest_line(sql, tokens)) from None
    except Exception as error:  # sqlglot's own failures on odd text: the text is refused
        message = (str(error).splitlines() or [""])[0]
        if not isinstance(error, SqlglotError):
            message = f"{type(error).__name__}: {message}"
        raise SqlProblem(f"SQL does not parse: {message}", _statement_line(sql, 0)) from None
    statements = [s for s in parsed if s is not None]
    for statement in statements:
        deep = nesting.past_depth(statement)
        if deep is not None:
            line = nesting.node_line(sql, deep) or nesting.deepest_line(sql, tokens)
            raise SqlProblem(f"SQL is {nesting.TOO_DEEP}", line)
    return statements


def _tokens(dialect: Dialect, sql: str) -> list[Token]:
    """The tokens of `sql`; SqlProblem at the line where what cannot be read starts (an
    unclosed quote or comment: the tokenizer reads to the end of the text looking for its
    end, so its own error points at the last line)."""
    tokenizer = dialect.tokenizer()
    try:
        return tokenizer.tokenize(sql)
    except SqlglotError:
        read = tokenizer.tokens
        rest = sql[read[-1].end + 1 :] if read else sql
        stuck = len(sql) - len(rest.lstrip())
        snippet = sql[stuck:].splitlines()[0][:30] if sql[stuck:] else ""
        raise SqlProblem(
            f"SQL does not parse: cannot read what starts with {snippet!r} (an unclosed quote "
            "or comment?)",
            sql[:stuck].count("\n") + 1,
        ) from None


def _statement_line(sql: str, index: int) -> int | None:
    """Line of the first token of the `index`-th statement (0-based), comments skipped."""
    try:
        tokens = sqlglot.tokenize(sql, read=DIALECT)
    except SqlglotError:
        return None
    seen, fresh = 0, True
    for token in tokens:
        if token.token_type is TokenType.SEMICOLON:
            fresh = True
            continue
        if fresh:
            if seen == index:
                # from the offset: sqlglot's token.line drifts after a `$name` parameter
                return sql[: token.start].count("\n") + 1
            seen, fresh = seen + 1, False
    return None


def table_line(sql: str, query: exp.Query, name: str) -> int | None:
    """Line (from the SQL's first line) where the query names table `name`."""
    for table in query.find_all(exp.Table):
        db = table.args.get("db")
        if (f"{db.name}.{table.name}" if db else table.name) == name:
            start = table.this.meta.get("start") if isinstance(table.this, exp.Expr) else None
            if start is not None:
                return sql[: int(start)].count("\n") + 1
    return None


def referenced_tables(query: exp.Query) -> set[str]:
    """Names of the tables a query reads, leaving out its own CTEs."""
    ctes = {cte.alias_or_name for cte in query.find_all(exp.CTE)}
    return {
        table.name
        for table in query.find_all(exp.Table)
        if table.name and table.name not in ctes and not table.args.get("db")
    } | {
        f"{table.args['db'].name}.{table.name}"
        for table in query.find_all(exp.Table)
        if table.args.get("db")
    }


def parameters(query: exp.Query) -> set[str]:
    return {str(p.this) for p in query.find_all(exp.Placeholder) if p.this is not None}


def line_of(sql: str, word: str) -> int | None:
    """First line (1-based) of `sql` mentioning `word`, to point users at the problem."""
    for number, text in enumerate(sql.splitlines(), start=1):
        if word.lower() in text.lower():
            return number
    return None


def normalized(query: exp.Query) -> str:
    """Canonical SQL: whitespace, comments and keyword case do not change it."""
    canonical = normalize_identifiers(query.copy(), dialect=DIALECT)
    return canonical.sql(dialect=DIALECT, normalize=True, comments=False, pretty=False)


def render(query: exp.Query, physical_tables: Mapping[str, str]) -> str:
    """The SQL to execute: source names replaced by their physical tables, placeholders kept."""

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table) and not node.args.get("db"):
            target = physical_tables.get(node.name)
            if target is not None:
                swapped = exp.to_table(target, dialect=DIALECT)
                swapped.set(
                    "alias",
                    node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name)),
                )
                return swapped
        return node

    return query.copy().transform(replace).sql(dialect=DIALECT, comments=False)


@functools.lru_cache(maxsize=256)
def parse_type(text: str) -> str:
    """The canonical spelling of a column type; raises SqlProblem for an unknown type."""
    try:
        data_type = nesting.parse_one(text, DIALECT, into=exp.DataType)
    except nesting.TooDeep:
        raise SqlProblem(f"column type {text[:40]!r}… is {nesting.TOO_DEEP}") from None
    except (SqlglotError, ValueError):
        raise SqlProblem(f"unknown column type {text!r}") from None
    if data_type.this == exp.DataType.Type.USERDEFINED:
        raise SqlProblem(f"unknown column type {text!r}")
    return data_type.sql(dialect=DIALECT)


def parse_problem(error: ParseError) -> str:
    """Where and why SQL stopped parsing, in the words of its author: sqlglot's descriptions
    name its own classes (`missing for <class 'sqlglot...And'>`)."""
    first = error.errors[0] if error.errors else {}
    highlight = first.get("highlight")
    near = f" near {highlight!r}" if highlight else ""
    description = str(first.get("description") or error).splitlines()[0]
    if description.startswith("Required keyword") and highlight:
        return f"something is missing after {highlight!r}"
    if description.startswith("Expecting )"):
        return f"a parenthesis is not closed{near}"
    # everything from the first `<class …>` or `<Token …>` on is the parser's, not the user's
    plain = re.split(r"\s*(?:for |of )?<", description)[0].strip().rstrip(".")
    return f"{plain or 'unexpected text'}{near}"


def predicate_problem(text: str, what: str = "a check") -> str | None:
    """Why `text` cannot be a row predicate (None when it can)."""
    try:
        parsed = nesting.parse_one(text, DIALECT, into=exp.Condition)
    except nesting.TooDeep:
        return f"is {nesting.TOO_DEEP}"
    except SqlglotError:
        try:
            # parsed again without `into` (not too deep: that was refused): that error says
            # where it stops
            sqlglot.parse_one(text, dialect=DIALECT)
        except ParseError as error:
            return f"is not a valid SQL predicate: {parse_problem(error)}"
        except SqlglotError:
            pass
        return "is not a valid SQL predicate"
    if parsed is None or isinstance(parsed, exp.Query):
        return "is not a valid SQL predicate"
    return _refusal(parsed, what)


def aggregate_problem(text: str, what: str = "a reconciliation") -> str | None:
    """Why `text` cannot be an aggregate over rows (sum, count, …; None when it can)."""
    try:
        parsed = nesting.parse_one(text, DIALECT)
    except nesting.TooDeep:
        return f"is {nesting.TOO_DEEP}"
    except ParseError as error:
        return f"is not an aggregate expression: {parse_problem(error)}"
    except SqlglotError:
        return "is not an aggregate expression"
    if (
        parsed is None
        or isinstance(parsed, exp.Query)
        or parsed.find(exp.AggFunc) is None
        or parsed.find(exp.Query) is not None
    ):
        return "is not an aggregate expression"
    return _refusal(parsed, what)


def _refusal(tree: exp.Expr, what: str) -> str | None:
    refused = refused_call(tree)
    return None if refused is None else refused.message(what)


# what DuckDB says when a query reads a column none of its tables has
_MISSING_COLUMN = re.compile(r'Referenced column "([^"]+)" not found')


def missing_column(sql: str, error: str, tables: Mapping[str, str]) -> str | None:
    """`source NAME has no column C` when `error` (an engine's, from planning or running `sql`)
    says a column the query reads is missing; `tables` maps each physical table the query may
    read to how the project knows it (`source orders`, `model daily_revenue`). None for any
    other error."""
    found = _MISSING_COLUMN.search(error)
    if found is None:
        return None
    column = found.group(1)
    try:
        tree = sqlglot.parse_one(sql, dialect=DIALECT)
    except SqlglotError:
        tree = None
    read: list[str] = []
    if tree is not None:
        aliases = {t.alias_or_name.lower(): t.name for t in tree.find_all(exp.Table)}
        for node in tree.find_all(exp.Column):
            if node.name.lower() != column.lower():
                continue
            if node.table and node.table.lower() in aliases:
                read = [aliases[node.table.lower()]]
                break
        else:
            read = sorted({t.name for t in tree.find_all(exp.Table)})
    named = [tables.get(t, f"table {t}") for t in read]
    if len(named) == 1:
        return f"{named[0]} has no column {column}"
    if named:
        return f"no table it reads ({', '.join(named)}) has column {column}"
    return f"no table it reads has column {column}"


def columns_read(text: str) -> set[str]:
    """The columns an expression reads (a lambda's parameters are not columns); empty when it
    does not parse (its parse is refused on its own)."""
    try:
        tree = sqlglot.parse_one(text, dialect=DIALECT)
    except SqlglotError:
        return set()
    if tree is None:
        return set()
    bound = {p.name for node in tree.find_all(exp.Lambda) for p in node.expressions if p.name}
    return {c.name for c in tree.find_all(exp.Column) if c.name and c.name not in bound}
