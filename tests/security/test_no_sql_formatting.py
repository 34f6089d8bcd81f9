"""SQL text is made only in src/tidegate/sql/ (STYLE.md): nowhere else may an f-string, `%`,
`.format()` or `+` build text that reads as a SQL statement.

Error messages are allowed to mention SQL words: text built inside a `raise`, or passed straight
to an exception's constructor, is not SQL that will run.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "tidegate"
SQL_PACKAGE = SRC / "sql"
HOLE = "{}"

# An uppercase statement keyword followed by what makes it a statement, also in uppercase: SQL
# here is written uppercase (sqlglot writes it so), and lowercase context reads as English.
SQL_SHAPE = re.compile(
    r"\bSELECT\s+(?:\*|DISTINCT\b|\{\}|%s)"
    r"|\bSELECT\b.*\bFROM\b"
    r"|\bINSERT\s+INTO\b"
    r"|\bUPDATE\s+\S+\s+SET\b"
    r"|\bDELETE\s+FROM\b"
    r"|\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?(?:TABLE|VIEW|SCHEMA|INDEX|SEQUENCE|MACRO)\b"
    r"|\bDROP\s+(?:TABLE|VIEW|SCHEMA|INDEX|SEQUENCE|MACRO)\b"
    r"|\bALTER\s+(?:TABLE|VIEW|SCHEMA)\b",
    re.DOTALL,
)
EXCEPTION_NAME = re.compile(r"(Error|Exception|Problem|Warning|Exit)$")


@dataclass(frozen=True)
class Finding:
    where: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: builds SQL by formatting: {self.text!r}"


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level `NAME = "literal"` assignments, to see through `QUERY.format(...)`."""
    found: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    return found


def _literal(node: ast.expr, strings: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in strings:
        return strings[node.id]
    if isinstance(node, ast.JoinedStr):
        return _joined(node)
    return None


def _joined(node: ast.JoinedStr) -> str:
    return "".join(part.value if isinstance(part, ast.Constant) else HOLE for part in node.values)


def _concatenation(node: ast.BinOp, strings: dict[str, str]) -> str | None:
    """Text of `a + b + ...` when it mixes string literals with computed values."""
    parts: list[ast.expr] = []

    def flatten(item: ast.expr) -> None:
        if isinstance(item, ast.BinOp) and isinstance(item.op, ast.Add):
            flatten(item.left)
            flatten(item.right)
        else:
            parts.append(item)

    flatten(node)
    pieces: list[tuple[str, bool]] = []  # (text, computed)
    for part in parts:
        if isinstance(part, ast.JoinedStr):
            pieces.append(
                (_joined(part), any(isinstance(v, ast.FormattedValue) for v in part.values))
            )
        else:
            text = _literal(part, strings)
            pieces.append((HOLE, True) if text is None else (text, False))
    if not any(computed for _, computed in pieces):
        return None
    return "".join(text for text, _ in pieces)


def _formatted_text(node: ast.AST, strings: dict[str, str]) -> str | None:
    """The literal text of a formatting expression, with its holes marked; None otherwise."""
    if isinstance(node, ast.JoinedStr):
        return _joined(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _literal(node.left, strings)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _concatenation(node, strings)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        return _literal(node.func.value, strings)
    return None


def _is_error_message(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Inside a `raise`, or an argument of a call to SomethingError(...)."""
    current = parents.get(node)
    while current is not None:
        if isinstance(current, ast.Raise):
            return True
        if isinstance(current, ast.Call):
            func = current.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if EXCEPTION_NAME.search(name):
                return True
        if isinstance(current, (ast.stmt, ast.Lambda)):
            return False
        current = parents.get(current)
    return False


def find_sql_formatting(source: str, where: str = "<snippet>") -> list[Finding]:
    tree = ast.parse(source)
    strings = _module_strings(tree)
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    findings = []
    for node in ast.walk(tree):
        text = _formatted_text(node, strings)
        if text is None or not SQL_SHAPE.search(text):
            continue
        if _is_error_message(node, parents):
            continue
        findings.append(Finding(where, getattr(node, "lineno", 0), text))
    return findings


# --- the detector, on snippets ------------------------------------------------------------------


@pytest.mark.parametrize(
    "snippet",
    [
        'q = f"SELECT * FROM {name}"',
        'q = f"SELECT {column} FROM t"',
        'q = f"SELECT\\n  a,\\n  b\\nFROM {t}"',
        'q = f"SELECT * FROM {t}" + ";"',
        'q = "SELECT * " + f"FROM {t}"',
        'q = "DELETE FROM %s WHERE id = 1" % table',
        'q = "INSERT INTO {} VALUES (?)".format(table)',
        'q = "DROP TABLE " + name',
        'q = "UPDATE " + name + " SET x = 1"',
        'QUERY = "UPDATE {} SET x = 1"\ndef f(t):\n    return QUERY.format(t)',
        'q = f"CREATE TABLE IF NOT EXISTS {t} AS SELECT 1"',
        'q = f"CREATE OR REPLACE VIEW {t} AS SELECT 1"',
        'q = f"ALTER TABLE {t} ADD COLUMN c INT"',
        'con.execute(f"SELECT count(*) FROM {table}")',
        'log(f"DROP TABLE {t}")',
    ],
)
def test_the_detector_flags_sql_built_by_formatting(snippet: str) -> None:
    assert find_sql_formatting(snippet), snippet


@pytest.mark.parametrize(
    "snippet",
    [
        'raise UsageError(f"a model holds exactly one SELECT, found {n} statements")',
        'raise SqlProblem(f"cannot SELECT x FROM {t}")',
        'problem = SqlProblem(f"SELECT * FROM {t} is not allowed")',
        'raise ConfigError(path, "DROP TABLE %s is refused" % name)',
        'q = "SELECT 1 FROM orders"',
        'q = f"selected {n} rows from {t}"',
        'q = f"{model}: drop the table by hand, then DROP it from the list"',
        'q = f"the SELECT in {path} reads from {table}"',
        'q = f"SELECT in {path}: use $start"',
        'q = "{name}: {count} rows".format(name=n, count=c)',
        'q = "a" + "b"',
        'q = f"{a}{b}"',
    ],
)
def test_the_detector_allows_messages_and_constants(snippet: str) -> None:
    assert find_sql_formatting(snippet) == []


def test_the_detector_reports_where() -> None:
    (finding,) = find_sql_formatting('x = 1\n\nq = f"DELETE FROM {t}"\n', "mod.py")
    assert (finding.where, finding.line) == ("mod.py", 3)
    assert "DELETE FROM {}" in str(finding)


# --- the source tree -----------------------------------------------------------------------------


def test_no_sql_is_built_by_formatting_outside_the_sql_package() -> None:
    files = [p for p in sorted(SRC.rglob("*.py")) if SQL_PACKAGE not in p.parents]
    assert len(files) > 20, "the scan must see the source tree"
    assert any(p.name == "duckdb.py" for p in files)
    findings = [
        finding
        for path in files
        for finding in find_sql_formatting(path.read_text(), str(path.relative_to(SRC.parent)))
    ]
    assert findings == [], "\n".join(str(f) for f in findings)


def test_a_formatted_query_added_to_a_real_module_would_be_caught() -> None:
    module = SRC / "engines" / "duckdb.py"
    source = module.read_text()
    assert find_sql_formatting(source) == []
    injected = (
        source + '\n\ndef rows(con, name):\n    return con.execute(f"SELECT * FROM {name}")\n'
    )
    (finding,) = find_sql_formatting(injected, "duckdb.py")
    assert finding.text == "SELECT * FROM {}"
