"""Model SQL fuzzed (hypothesis): nesting of every kind and depth, long lists, odd characters
(NUL and other control characters, unicode, unterminated strings and comments, `$` parameters)
spliced anywhere in the file, header included.

The property: the project loads and snapshots as `build` would (parsed, normalized, lineage
traced, written out for the warehouse and parsed again), or it is refused with a ConfigError
(exit 2) naming the model file, and the line for anything its parser refused; never another
exception. Most examples go through the loader alone (fast); a handful through `tidegate build`,
which must then exit 0 or 2 with one line and, when refused, write nothing.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kit import example_project, state_dump, tidegate
from tidegate.domain.errors import TidegateError
from tidegate.ops.build import snapshots
from tidegate.project.loader import load_project

FILE = "models/daily_revenue.sql"
COUNT = "count(*) AS order_count"
# small, so that the long lists below cross it now and then
LIMIT = 20_000
WHERE = re.compile(rf"^{re.escape(FILE)}:(\d+): ")
TOO_BIG = f"{FILE}: model file is "


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = example_project(tmp_path_factory.mktemp("sql-fuzz") / "proj", deploy=False)
    config = root / "tidegate.toml"
    config.write_text(config.read_text() + f"\n[limits]\nmodel_file_bytes = {LIMIT}\n")
    yield root


@pytest.fixture(scope="module")
def original(project: Path) -> str:
    return (project / FILE).read_text()


def wrapped(kind: str, depth: int) -> str:
    """`count(*)` inside `depth` levels of one kind of nesting."""
    inner = "count(*)"
    if kind == "parentheses":
        return "(" * depth + inner + ")" * depth
    if kind == "case":
        return "CASE WHEN true THEN " * depth + inner + " END" * depth
    if kind == "calls":
        return "abs(" * depth + inner + ")" * depth
    if kind == "casts":
        return "CAST(" * depth + inner + " AS BIGINT)" * depth
    if kind == "subqueries":
        return "(SELECT " * depth + inner + ")" * depth
    if kind == "lists":
        return "[" * depth + inner + "]" * depth
    if kind == "not":
        return "NOT " * depth + f"({inner} > 0)"
    if kind == "minus":
        return "- " * depth + inner
    if kind == "chain":
        return inner + "::BIGINT" * depth
    raise AssertionError(kind)


KINDS = ("parentheses", "case", "calls", "casts", "subqueries", "lists", "not", "minus", "chain")
ODD = st.sampled_from(
    [
        "\x00",
        "\x01",
        "\x1b[2J",
        "\x7f",
        "\r",
        "\x0b",
        "\u2028",
        "\u202e",
        "\ufeff",
        "é",
        "𝔘",
        "'",
        '"',
        "`",
        "/*",
        "*/",
        "--",
        "$",
        "$$",
        "$tag$",
        "$start",
        "$1",
        "$end)",
        "\\",
        ";",
        "(",
        ")",
        "[",
        "{",
        "E'",
        "0x",
        "1e999",
        "''''",
    ]
) | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)
SOUP = st.lists(
    st.sampled_from(
        [
            "SELECT",
            "FROM",
            "orders",
            "WHERE",
            "(",
            ")",
            ",",
            "CASE",
            "WHEN",
            "THEN",
            "END",
            "1",
            "'a'",
            "$start",
            "AS",
            "x",
            "*",
            "+",
            "-",
            "::",
            "[",
            "]",
            "UNION",
            "WITH",
            "GROUP BY",
            "|>",
            "~",
            "NOT",
        ]
    ),
    max_size=30,
).map(" ".join)


@st.composite
def model_files(draw: st.DrawFn, original: str) -> str:
    header, end, select = original.partition("*/\n")
    choice = draw(st.sampled_from(["nested", "long list", "odd splice", "soup", "odd select"]))
    if choice == "nested":
        kind = draw(st.sampled_from(KINDS))
        depth = draw(st.integers(0, 260) | st.sampled_from([1_000, 5_000]))
        return original.replace(COUNT, f"{wrapped(kind, depth)} AS order_count")
    if choice == "long list":
        items = draw(st.integers(0, 3_000))
        listed = ", ".join(str(i) for i in range(items)) or "NULL"
        return original.replace("GROUP BY", f"AND status NOT IN ({listed})\nGROUP BY")
    if choice == "odd splice":
        at = draw(st.integers(0, len(original)))
        return original[:at] + draw(ODD) + original[at:]
    if choice == "soup":
        return header + end + draw(SOUP)
    at = draw(st.integers(0, len(select)))
    return header + end + select[:at] + draw(ODD) + draw(ODD) + select[at:]


def assert_loads_or_is_refused(project: Path) -> None:
    try:
        loaded = load_project(project)
        list(snapshots(loaded))
    except TidegateError as error:
        message = " ".join(str(error).splitlines())
        assert error.exit_code == 2, message
        assert WHERE.match(message) or message.startswith(TOO_BIG), message


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_model_sql_loads_or_is_refused_naming_its_file_and_line(
    project: Path, original: str, data: st.DataObject
) -> None:
    text = data.draw(model_files(original))
    (project / FILE).write_text(text, encoding="utf-8")
    try:
        assert_loads_or_is_refused(project)
    finally:
        (project / FILE).write_text(original)


CLI_CASES = [
    "\x00",
    "'unterminated",
    "/* unterminated",
    "$$ dollar",
    "$1",
    wrapped("parentheses", 10_000),
    wrapped("case", 120),
    "~ ~ ",
]


@pytest.mark.parametrize("odd", CLI_CASES, ids=[repr(c[:20]) for c in CLI_CASES])
def test_build_of_odd_sql_exits_0_or_2_in_one_line_and_writes_nothing_when_refused(
    project: Path, original: str, tmp_path: Path, odd: str
) -> None:
    copy = tmp_path / "proj"
    shutil.copytree(project, copy)
    (copy / FILE).write_text(original.replace(COUNT, f"{odd} {COUNT}"))
    before = state_dump(copy)
    done = tidegate("build", "--project", copy)
    assert done.exit_code in (0, 2), done
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    if done.exit_code == 2:
        [line] = done.stderr.splitlines()
        message = line.removeprefix("error: ")
        assert WHERE.match(message) or message.startswith(TOO_BIG), line
        assert state_dump(copy) == before
