"""G6 for configuration and usage: every bad project file or command line exits 2 with one line
on stderr that says where the problem is (`path:LINE: field: message`), and writes nothing.

Each case mutates a copy of the orders example. Expected line numbers are found by locating a
marker that occurs exactly once in the mutated file, so they are exact, not approximate.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kit import Result, state_dump, tidegate, warehouse_dump

DAILY = "models/daily_revenue.sql"
MONTHLY = "models/monthly_revenue.sql"
REPORT = "models/revenue_report.sql"
PROJECT_FILE = "tidegate.toml"
WHERE = re.compile(r"^error: (?P<path>.+?):(?P<line>\d+): (?P<message>.+)$")

Mutation = Callable[[Path], None]


def edit(file: str, old: str, new: str) -> Mutation:
    """Replace the one occurrence of `old` in `file`."""

    def mutate(project: Path) -> None:
        path = project / file
        text = path.read_text()
        assert text.count(old) == 1, f"{old!r} must occur once in {file}"
        path.write_text(text.replace(old, new))

    return mutate


def write(file: str, text: str) -> Mutation:
    def mutate(project: Path) -> None:
        (project / file).write_text(text)

    return mutate


def copy(source: str, target: str) -> Mutation:
    def mutate(project: Path) -> None:
        shutil.copyfile(project / source, project / target)

    return mutate


def replace_sql(file: str, sql: str) -> Mutation:
    """Keep the header of `file`, replace the SQL after it."""

    def mutate(project: Path) -> None:
        path = project / file
        header, end, _ = path.read_text().partition("*/\n")
        path.write_text(header + end + sql)

    return mutate


def both(*mutations: Mutation) -> Mutation:
    def mutate(project: Path) -> None:
        for mutation in mutations:
            mutation(project)

    return mutate


def line_of(project: Path, file: str, marker: str) -> int:
    """The 1-based line of `file` holding `marker`, which must occur on exactly one line."""
    found = [
        n for n, text in enumerate((project / file).read_text().splitlines(), 1) if marker in text
    ]
    assert len(found) == 1, f"marker {marker!r} is on lines {found} of {file}"
    return found[0]


def one_line(result: Result) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0], f"want one line on stderr, got {result.stderr!r}"
    return lines[0]


def refused(project: Path, *args: str, code: int = 2) -> str:
    """Run tidegate on `project`; assert exit `code`, one stderr line, nothing written."""
    state_before, warehouse_before = state_dump(project), warehouse_dump(project)
    result = tidegate(*args, "--project", project)
    assert result.exit_code == code, result
    line = one_line(result)
    assert result.stdout == "", result.stdout
    assert state_dump(project) == state_before, "the ledger changed"
    assert warehouse_dump(project) == warehouse_before, "the warehouse changed"
    return line


@dataclass(frozen=True)
class Bad:
    """A bad project: how to make it, which file and line the error must name, and the field."""

    mutate: Mutation
    file: str
    at: str | int | None  # marker of the expected line, an exact line, or None: any line
    field: str | None  # text that names the field or value at fault


CYCLE_MODEL = """/* tidegate
grain = "month"
time_column = "month"
start = "2025-01"

[columns]
month = "DATE NOT NULL"
*/
SELECT month
FROM revenue_report
WHERE month >= $start AND month < $end
"""

KEY_MODEL = """/* tidegate
grain = "key"
key_column = "status"
keys = ["completed", "shipped"]

[columns]
status = "VARCHAR NOT NULL"
order_count = "BIGINT NOT NULL"

[[checks]]
type = "row_count"
relative_to = "previous"
max_ratio = 2.0
*/
SELECT status, count(*) AS order_count FROM orders WHERE status = $key GROUP BY status
"""


def add_check(toml: str) -> Mutation:
    """Declare one more check in daily_revenue (its fourth: checks[3])."""
    return edit(
        DAILY, "# Reconciled per partition", f"[[checks]]\n{toml}\n# Reconciled per partition"
    )


def query_check(sql: str) -> Mutation:
    return add_check(f'type = "query"\nsql = "{sql}"\n')


CHECK_CASES: dict[str, Bad] = {
    "null ratio above 1": Bad(
        add_check('type = "null_ratio"\ncolumn = "status"\nmax = 1.5\n'), DAILY, "max = 1.5", "max"
    ),
    "relative row_count without a ratio": Bad(
        add_check('type = "row_count"\nrelative_to = "previous"\n'),
        DAILY,
        'relative_to = "previous"',
        "min_ratio or max_ratio",
    ),
    "relative row_count with an absolute min": Bad(
        add_check('type = "row_count"\nrelative_to = "previous"\nmin = 5\nmin_ratio = 0.5\n'),
        DAILY,
        "min = 5",
        "min",
    ),
    "ratio of zero": Bad(
        add_check('type = "row_count"\nrelative_to = "previous"\nmin_ratio = 0\n'),
        DAILY,
        "min_ratio = 0",
        "min_ratio must be above 0",
    ),
    "min_ratio above max_ratio": Bad(
        add_check(
            'type = "row_count"\nrelative_to = "previous"\nmin_ratio = 2.0\nmax_ratio = 1.5\n'
        ),
        DAILY,
        "min_ratio = 2.0",
        "min_ratio is above max_ratio",
    ),
    "ratio without relative_to": Bad(
        add_check('type = "row_count"\nmax_ratio = 2\n'), DAILY, "max_ratio = 2", "relative_to"
    ),
    "relative to a source the model does not read": Bad(
        add_check(
            'type = "row_count"\nrelative_to = "source"\nsource = "payments"\nmin_ratio = 0.1\n'
        ),
        DAILY,
        'source = "payments"',
        "payments",
    ),
    "relative to a source without naming it": Bad(
        add_check('type = "row_count"\nrelative_to = "source"\nmin_ratio = 0.1\n'),
        DAILY,
        'relative_to = "source"',
        "source = NAME",
    ),
    "relative to the previous key": Bad(
        write("models/by_status.sql", KEY_MODEL),
        "models/by_status.sql",
        'relative_to = "previous"',
        "time grain",
    ),
    "freshness of a number": Bad(
        add_check('type = "freshness"\ncolumn = "order_count"\nmax_age = "2d"\n'),
        DAILY,
        'column = "order_count"',
        "BIGINT",
    ),
    "freshness max_age that is not a duration": Bad(
        add_check('type = "freshness"\ncolumn = "order_date"\nmax_age = "soon"\n'),
        DAILY,
        'max_age = "soon"',
        "max_age",
    ),
    "distinct_count without bounds": Bad(
        add_check('type = "distinct_count"\ncolumns = ["status"]\n'),
        DAILY,
        'type = "distinct_count"',
        "min or max",
    ),
    "distinct_count min above max": Bad(
        add_check('type = "distinct_count"\ncolumns = ["status"]\nmin = 5\nmax = 2\n'),
        DAILY,
        "min = 5",
        "min is above max",
    ),
    "distinct_count of an unknown column": Bad(
        add_check('type = "distinct_count"\ncolumns = ["status", "region"]\nmax = 2\n'),
        DAILY,
        'columns = ["status", "region"]',
        "region",
    ),
    "query check that writes": Bad(
        query_check("DELETE FROM this"), DAILY, 'sql = "DELETE FROM this"', "must be a SELECT"
    ),
    "query check with two statements": Bad(
        query_check("SELECT order_date FROM this; SELECT 1"), DAILY, "; SELECT 1", "2 statements"
    ),
    "query check that does not parse": Bad(
        query_check("SELECT order_date FROM this WHERE"), DAILY, "FROM this WHERE", "parse"
    ),
    "query check reading an unknown table": Bad(
        query_check("SELECT t.order_date FROM this AS t JOIN customers AS c ON c.id = t.status"),
        DAILY,
        "JOIN customers",
        "customers",
    ),
    "query check reading a model the model does not read": Bad(
        query_check("SELECT month AS order_date FROM monthly_revenue"),
        DAILY,
        "FROM monthly_revenue",
        "'monthly_revenue'",
    ),
    "query check reading a file": Bad(
        query_check("SELECT * FROM read_csv('/etc/passwd')"),
        DAILY,
        "read_csv",
        "function read_csv is not allowed in a check",
    ),
    "query check without the partition column": Bad(
        query_check("SELECT status FROM this WHERE order_count < 0"),
        DAILY,
        "WHERE order_count < 0",
        "'order_date'",
    ),
    "query check with a parameter": Bad(
        query_check("SELECT order_date FROM this WHERE order_date >= $start"),
        DAILY,
        "order_date >= $start",
        "$parameters",
    ),
}

CASES: dict[str, Bad] = {
    "unknown header key": Bad(
        edit(DAILY, "schedule = ", 'colour = "red"\nschedule = '), DAILY, 'colour = "red"', "colour"
    ),
    "start is a number": Bad(
        edit(DAILY, 'start = "2025-01-01"', "start = 5"), DAILY, "start = 5", "start"
    ),
    "deprecated column not in columns": Bad(
        edit(DAILY, "[columns]\n", '[deprecated]\ngross = "2026-01-01"\n\n[columns]\n'),
        DAILY,
        'gross = "2026-01-01"',
        "gross",
    ),
    "deprecated until a non-date": Bad(
        edit(DAILY, "[columns]\n", '[deprecated]\ngross_revenue = "soon"\n\n[columns]\n'),
        DAILY,
        'gross_revenue = "soon"',
        "YYYY-MM-DD",
    ),
    "schedule is not cron": Bad(
        edit(DAILY, 'schedule = "0 2 * * *"', 'schedule = "daily at two"'),
        DAILY,
        'schedule = "daily at two"',
        "cron",
    ),
    "unique_key is a string": Bad(
        edit(DAILY, 'unique_key = ["order_date", "status"]', 'unique_key = "x"'),
        DAILY,
        'unique_key = "x"',
        "unique_key",
    ),
    "unknown grain": Bad(
        edit(DAILY, 'grain = "day"', 'grain = "week"'), DAILY, 'grain = "week"', "grain"
    ),
    "day grain without time_column": Bad(
        edit(DAILY, 'time_column = "order_date"\n', ""), DAILY, 'grain = "day"', "time_column"
    ),
    "header without grain": Bad(edit(DAILY, 'grain = "day"\n', ""), DAILY, None, "grain"),
    "time_column not among the columns": Bad(
        edit(DAILY, 'time_column = "order_date"', 'time_column = "order_day"'),
        DAILY,
        'time_column = "order_day"',
        "time_column",
    ),
    "unknown column type": Bad(
        edit(DAILY, 'order_count = "BIGINT NOT NULL"', 'order_count = "NUMBERWANG NOT NULL"'),
        DAILY,
        "NUMBERWANG",
        "order_count",
    ),
    "column name with a newline": Bad(
        edit(DAILY, "[columns]\n", '[columns]\n"bad\\nname" = "INTEGER"\n'),
        DAILY,
        None,
        "columns",
    ),
    "reads an unknown table": Bad(
        edit(DAILY, "FROM orders", "FROM orderz"), DAILY, "FROM orderz", "orderz"
    ),
    # "revenue" also appears in the comment above the SELECT: the line must be the FROM line
    "reads an unknown table named in a comment": Bad(
        edit(DAILY, "FROM orders", "FROM revenue"), DAILY, "FROM revenue", "revenue"
    ),
    "cycle between models": Bad(
        both(
            write("models/quarterly_report.sql", CYCLE_MODEL),
            edit(
                MONTHLY,
                "FROM daily_revenue\n",
                "FROM daily_revenue\nCROSS JOIN (SELECT count(*) FROM quarterly_report) AS q\n",
            ),
        ),
        MONTHLY,
        "quarterly_report",
        "cycle",
    ),
    "TOML syntax error in the header": Bad(
        edit(DAILY, 'grain = "day"', 'grain = "day'), DAILY, 'grain = "day', None
    ),
    "header missing": Bad(edit(DAILY, "/* tidegate", "/* model"), DAILY, 1, "tidegate"),
    "SQL syntax error after a $parameter": Bad(
        edit(
            DAILY,
            "GROUP BY CAST(order_ts AS DATE), status",
            "GROUP BY BY CAST(order_ts AS DATE), status",
        ),
        DAILY,
        "GROUP BY BY",
        "parse",
    ),
    "two SQL statements": Bad(
        edit(
            DAILY,
            "GROUP BY CAST(order_ts AS DATE), status",
            "GROUP BY CAST(order_ts AS DATE), status; SELECT 1",
        ),
        DAILY,
        "; SELECT 1",
        "statement",
    ),
    "DELETE instead of SELECT": Bad(
        replace_sql(DAILY, "-- remove the day\nDELETE FROM orders\nWHERE order_ts >= $start\n"),
        DAILY,
        "DELETE FROM orders",
        "SELECT",
    ),
    "unknown $parameter": Bad(
        edit(DAILY, "order_ts < $end", "order_ts < $finish"), DAILY, "$finish", "$finish"
    ),
    "check names a column not in columns": Bad(
        edit(DAILY, 'column = "status"', 'column = "state"'), DAILY, 'column = "state"', "state"
    ),
    "expression check that is not SQL": Bad(
        edit(DAILY, '"net_revenue <= gross_revenue"', '"net_revenue <= <= gross_revenue"'),
        DAILY,
        "<= <=",
        "expression",
    ),
    "reserved model name list": Bad(copy(REPORT, "models/list.sql"), "models/list.sql", 1, "list"),
    "model name that looks like a run id": Bad(
        copy(REPORT, "models/run-20250101T000000000000Z-abcdef.sql"),
        "models/run-20250101T000000000000Z-abcdef.sql",
        1,
        "run-20250101T000000000000Z-abcdef",
    ),
    "unknown key in tidegate.toml": Bad(
        edit(PROJECT_FILE, 'path = "warehouse.duckdb"', 'path = "warehouse.duckdb"\nflavour = "x"'),
        PROJECT_FILE,
        'flavour = "x"',
        "flavour",
    ),
    "unknown engine in tidegate.toml": Bad(
        edit(PROJECT_FILE, 'engine = "duckdb"', 'engine = "oracle"'),
        PROJECT_FILE,
        'engine = "oracle"',
        "engine",
    ),
    "TOML syntax error in tidegate.toml": Bad(
        edit(PROJECT_FILE, "[sources.orders]", "[sources.orders"),
        PROJECT_FILE,
        "[sources.orders",
        None,
    ),
    **CHECK_CASES,
}


def assert_points_at(project: Path, line: str, bad: Bad) -> None:
    where = WHERE.match(line)
    assert where, f"not `path:LINE: message`: {line!r}"
    assert (project / where["path"]).resolve() == (project / bad.file).resolve(), line
    if isinstance(bad.at, str):
        assert int(where["line"]) == line_of(project, bad.file, bad.at), line
    elif isinstance(bad.at, int):
        assert int(where["line"]) == bad.at, line
    if bad.field is not None:
        assert bad.field in where["message"], line


@pytest.mark.parametrize("case", list(CASES))
def test_bad_project_is_refused_with_file_line_and_field(project: Path, case: str) -> None:
    bad = CASES[case]
    bad.mutate(project)
    line = refused(project, "build")
    assert_points_at(project, line, bad)


@pytest.mark.parametrize("command", [("run",), ("status",), ("run", "daily_revenue")])
@pytest.mark.parametrize(
    "case", ["unknown header key", "reads an unknown table", "unknown engine in tidegate.toml"]
)
def test_other_commands_refuse_a_bad_project_the_same_way(
    project: Path, case: str, command: tuple[str, ...]
) -> None:
    bad = CASES[case]
    bad.mutate(project)
    line = refused(project, *command)
    assert_points_at(project, line, bad)


def test_exact_lines_in_the_orders_example(project: Path) -> None:
    """Pin a few line numbers literally, so the marker search itself cannot drift."""
    expected = {
        "start is a number": (DAILY, 4),
        "unknown grain": (DAILY, 2),
        "unknown column type": (DAILY, 11),
        "reads an unknown table": (DAILY, 56),
        "unknown engine in tidegate.toml": (PROJECT_FILE, 6),
    }
    for case, (file, number) in expected.items():
        copy_of = project.parent / re.sub(r"\W+", "_", case)
        shutil.copytree(project, copy_of)
        CASES[case].mutate(copy_of)
        where = WHERE.match(refused(copy_of, "build"))
        assert where, case
        assert where["path"].endswith(file), (case, where["path"])
        assert int(where["line"]) == number, (case, where.group(0))


def test_missing_project_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = tidegate("build", "--project", empty)
    assert result.exit_code == 2
    assert "tidegate.toml" in one_line(result)
    assert list(empty.iterdir()) == [], "a refused command created files"


# -- command-line usage -----------------------------------------------------------------------

USAGE = {
    "unknown option": (("build", "--no-such-option"), "--no-such-option"),
    "invalid --as-of": (("status", "--as-of", "yesterday"), "yesterday"),
    "reversed range": (
        ("run", "daily_revenue", "--partition", "2025-03-05..2025-03-01"),
        "2025-03-05..2025-03-01",
    ),
    "invalid date": (("run", "daily_revenue", "--partition", "2025-02-30"), "2025-02-30"),
    "month label for a day model": (
        ("run", "daily_revenue", "--partition", "2025-03"),
        "2025-03",
    ),
    "--force without --reason": (("deploy", "daily_revenue", "--force"), "--reason"),
    "unknown model to run": (("run", "no_such_model", "--partition", "2025-03-01"), "no_such"),
    "unknown model to deploy": (("deploy", "no_such_model"), "no_such_model"),
    "unknown model for status": (("status", "no_such_model"), "no_such_model"),
    "unknown model for history": (("history", "no_such_model"), "no_such_model"),
    "unknown version": (("deploy", "daily_revenue", "--version", "v99"), "v99"),
    "invalid partition to show": (
        ("show", "partition", "daily_revenue", "2025-02-30"),
        "2025-02-30",
    ),
    "not a run id": (("show", "run", "not-a-run"), "not-a-run"),
    "unknown command": (("bogus",), "bogus"),
}


@pytest.mark.parametrize("case", list(USAGE))
def test_usage_error_is_one_line_exit_2_and_writes_nothing(project: Path, case: str) -> None:
    args, named = USAGE[case]
    line = refused(project, *args)
    assert line.startswith("error: "), line
    assert named in line, line


def test_usage_error_with_json_prints_an_error_document(project: Path) -> None:
    result = tidegate("deploy", "daily_revenue", "--version", "v99", "--json", "--project", project)
    assert result.exit_code == 2
    assert "v99" in one_line(result)
    document = result.json()
    assert document["schema"] == "tidegate.error/v1"
    assert document["exit_code"] == 2
    assert "v99" in document["error"]


# -- a breaking change needs --force --reason ------------------------------------------------


def drop_net_revenue(project: Path) -> None:
    both(
        edit(DAILY, 'net_revenue = "DECIMAL(18, 2) NOT NULL"\n', ""),
        edit(
            DAILY,
            "AS gross_revenue,\n    CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2))"
            " AS net_revenue\n",
            "AS gross_revenue\n",
        ),
        edit(
            DAILY,
            '[[checks]]\nname = "net_not_above_gross"\ntype = "expression"\n'
            'expression = "net_revenue <= gross_revenue"\n',
            "",
        ),
        # a reconciliation of a column the model no longer has is refused at build
        edit(
            DAILY,
            '[[reconciliations]]\nname = "net_amount"\nsource = "orders"\n'
            'source_expression = "sum(gross_amount - discount - refund)"\n'
            'target_expression = "sum(net_revenue)"\n',
            "",
        ),
    )(project)


def active_version(project: Path, model: str) -> str:
    status = tidegate("status", model, "--json", "--project", project)
    assert status.exit_code == 0, status.stderr
    return str(status.json()["models"][0]["active_version"]["id"])


def test_breaking_change_is_refused_then_forced_with_a_reason(project: Path) -> None:
    before = active_version(project, "daily_revenue")
    drop_net_revenue(project)
    built = tidegate("build", "--json", "--project", project)
    assert built.exit_code == 0, built.stderr
    daily = next(m for m in built.json()["models"] if m["model"] == "daily_revenue")
    assert daily["change"] == "breaking"
    assert daily["version_id"] != before

    line = refused(project, "deploy", "daily_revenue", code=3)
    assert "breaking" in line and "--force" in line, line
    assert active_version(project, "daily_revenue") == before

    forced = tidegate(
        "deploy", "daily_revenue", "--force", "--reason", "x", "--json", "--project", project
    )
    assert forced.exit_code == 0, forced.stderr
    assert forced.json()["forced"] is True
    assert forced.json()["previous_version"] == before
    assert active_version(project, "daily_revenue") == daily["version_id"]

    history = tidegate("history", "daily_revenue", "--json", "--project", project).json()
    deploys = [e for e in history["events"] if e["kind"] == "deploy"]
    assert deploys[-1]["version_id"] == daily["version_id"]
    assert deploys[-1]["reason"] == "x"
    assert deploys[-1]["detail"]["forced"] is True
    assert all(e["reason"] is None for e in deploys[:-1])


# -- property: no header text makes tidegate crash -------------------------------------------

EXAMPLE_DAILY = (resources.files("tidegate") / "examples" / "orders" / DAILY).read_text()
EXAMPLE_BODY, _, EXAMPLE_SQL = EXAMPLE_DAILY.removeprefix("/* tidegate\n").partition("*/")
TOMLISH = st.text(alphabet=list('[]="\\\n .,#:abcdegkmnrstu_0123456789-'), max_size=60)


@st.composite
def header_bodies(draw: st.DrawFn) -> str:
    """Arbitrary text, or the real header with arbitrary text spliced into one of its lines."""
    if draw(st.booleans()):
        return draw(st.text())
    real = EXAMPLE_BODY.splitlines(keepends=True)
    position = draw(st.integers(0, len(real)))
    junk = draw(st.one_of(st.text(), TOMLISH))
    return "".join([*real[:position], junk, "\n", *real[position:]])


def test_the_spliced_header_is_valid_without_junk(undeployed_project: Path) -> None:
    """The property below starts from a header that builds: its failures come from the junk."""
    path = undeployed_project / DAILY
    path.write_text("/* tidegate\n" + EXAMPLE_BODY + "*/" + EXAMPLE_SQL)
    result = tidegate("build", "--project", undeployed_project)
    assert result.exit_code == 0, result.stderr


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(body=header_bodies())
def test_any_header_text_exits_0_or_2_with_at_most_one_line(
    undeployed_project: Path, body: str
) -> None:
    (undeployed_project / DAILY).write_text(
        "/* tidegate\n" + body + "*/" + EXAMPLE_SQL, encoding="utf-8"
    )
    result = tidegate("build", "--project", undeployed_project)
    assert result.exit_code in (0, 2), result
    assert "Traceback" not in result.stderr
    assert result.stderr.rstrip("\n").count("\n") == 0, result.stderr
    if result.exit_code == 2:
        assert result.stderr.startswith(f"error: {DAILY}"), result.stderr
