"""Hostile input is refused, never crashed on: exit 2, one line `error: …` naming what is wrong
(the file and line, for a project file), and nothing written to the ledger or the warehouse.

- partitions and `--as-of` at the ends of the calendar (a partition whose end, or whose
  neighbour, would be past year 9999 or before year 1), to every command that takes them;
- model SQL nested deeply (a plausible depth builds, runs and publishes; an absurd one is
  refused naming the file and line), in the SELECT and in the other SQL a model declares;
- project files that are not UTF-8 text, TOML nested past what its parser takes, Python
  models the Python parser gives up on;
- model files past the size limit (`[limits] model_file_bytes`), refused before parsing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tidegate as tidegate_package
from tests.hostile_kit import MODEL, Dumps
from tests.kit import state_dump, tidegate, warehouse_dump, warehouse_execute

PROGRAMS = Path(tidegate_package.__file__).parent / "examples" / "programs"
MONTHLY = "monthly_revenue"
DAILY_FILE = "models/daily_revenue.sql"
MONTHLY_FILE = "models/monthly_revenue.sql"


def refused(project: Path, args: tuple[str, ...], before: Dumps) -> str:
    """Run `args`: exit 2, nothing on stdout, one line on stderr, both stores as `before`."""
    result = tidegate(*args, "--project", project)
    assert result.exit_code == 2, (args, result)
    assert result.stdout == "", result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "internal error" not in lines[0] and "Traceback" not in result.stderr, lines[0]
    assert (state_dump(project), warehouse_dump(project)) == before, f"{args} wrote"
    return lines[0]


def run_id(project: Path) -> str:
    listed = tidegate("backfill", "list", "--json", "--project", project)
    return str(listed.json()["runs"][0]["run_id"])


# -- partitions at the ends of the calendar ----------------------------------------------------

SPAN = "0002-01-01 to 9998-12-31"
EDGES = {
    MODEL: [
        "9999-12-31",
        "9999-12-30..9999-12-31",
        "2025-01-01..9999-12-31",
        "9999-01-01",
        "0001-01-01",
        "0001-01-01..2025-01-01",
    ],
    MONTHLY: ["9999-12", "9999-11..9999-12", "0001-01"],
}


def partition_commands(project: Path, model: str, partitions: str) -> list[tuple[str, ...]]:
    return [
        ("run", model, "--partition", partitions),
        ("backfill", model, "--partitions", partitions),
        ("backfill", model, "--partitions", partitions, "--dry-run"),
        ("rerun", run_id(project), "--partitions", partitions, "--approve", "x"),
        ("rerun", run_id(project), "--partitions", partitions, "--dry-run"),
        ("taint", model, "--partitions", partitions, "--reason", "x"),
        ("recover", model, "--partitions", partitions),
        ("validate", model, "--partitions", partitions),
        ("diff", model, "--left", "v1", "--right", "v1", "--partitions", partitions),
        ("ack", "finance", model, "--partitions", partitions),
        ("show", "partition", model, partitions),
        ("verify", model, "--partitions", partitions),
    ]


EDGE_CASES = [(model, text) for model, texts in EDGES.items() for text in texts]


@pytest.mark.parametrize(("model", "partitions"), EDGE_CASES, ids=[t for _, t in EDGE_CASES])
def test_a_partition_past_the_calendar_is_refused_by_every_command(
    shared: Path, baseline: Dumps, model: str, partitions: str
) -> None:
    for args in partition_commands(shared, model, partitions):
        line = refused(shared, args, baseline)
        if args[0] in ("rerun", "ack") and model != MODEL:
            continue  # the run and the consumer are daily_revenue's: refused for that
        if args[0] == "show" and ".." in partitions:
            assert "not a day partition" in line or "not a month partition" in line, line
        else:
            assert SPAN in line, (args, line)


def test_the_last_partitions_handled_publish_like_any_other(fresh: Path) -> None:
    """The days of 9998-12 and the month are partitions like any other: with source rows there
    they publish, the month reading its days, and the ledger and the warehouse agree."""
    warehouse_execute(
        fresh,
        "INSERT INTO orders SELECT * EXCLUDE (day) REPLACE (order_id + 10000000 + day AS order_id, "
        "TIMESTAMP '9998-12-01 23:00:00' + to_days(CAST(day AS INTEGER)) AS order_ts) "
        "FROM (SELECT * FROM orders LIMIT 1), range(31) AS days(day)",
    )
    for args in (
        ("backfill", MODEL, "--partitions", "9998-12-01..9998-12-31"),
        ("backfill", MONTHLY, "--partitions", "9998-12"),
        ("backfill", "revenue_report", "--partitions", "9998-12"),
        ("show", "partition", MODEL, "9998-12-31"),
        ("status",),
        ("verify", "--checksums"),
    ):
        done = tidegate(*args, "--project", fresh)
        assert done.exit_code == 0, (args, done.stderr)


def test_a_model_starting_past_the_calendar_is_refused_at_build(fresh: Path) -> None:
    path = fresh / DAILY_FILE
    path.write_text(path.read_text().replace('start = "2025-01-01"', 'start = "9999-12-31"'))
    before = state_dump(fresh), warehouse_dump(fresh)
    line = refused(fresh, ("build",), before)
    assert line.startswith(f"error: {DAILY_FILE}:4: start:") and SPAN in line, line


# -- --as-of at the ends of the calendar -------------------------------------------------------

AS_OF = [
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+05:00",  # year 0 in UTC
    "9999-12-31T23:00:00-05:00",  # year 10000 in UTC
    "9999-12-31T23:59:59Z",
    "0001-01-01",
]
AS_OF_COMMANDS: list[tuple[str, ...]] = [
    ("status",),
    ("status", MODEL),
    ("run", MODEL),
    ("backfill", MODEL, "--partitions", "2025-01-04"),
    ("report", "--out", "report.html"),
    ("history", MODEL),
]


@pytest.mark.parametrize("as_of", AS_OF)
def test_an_as_of_past_the_calendar_is_refused(shared: Path, baseline: Dumps, as_of: str) -> None:
    for args in AS_OF_COMMANDS:
        line = refused(shared, (*args, "--as-of", as_of), baseline)
        assert "--as-of" in line and SPAN in line, line
    assert not (shared / "report.html").exists()


# -- model SQL nested deeply -------------------------------------------------------------------


# the SELECT's count, not the reconciliation's `count(*)` in the header
COUNT = "count(*) AS order_count"


def nested_parentheses(depth: int) -> Callable[[str], str]:
    return lambda sql: sql.replace(COUNT, "(" * depth + COUNT.replace(" AS", ")" * depth + " AS"))


def nested_cases(depth: int) -> Callable[[str], str]:
    opened = "".join(f"CASE WHEN status = 'never{i}' THEN -1 ELSE " for i in range(depth))
    return lambda sql: sql.replace(COUNT, opened + COUNT.replace(" AS", " END" * depth + " AS"))


def edit_model(project: Path, file: str, change: Callable[[str], str]) -> None:
    path = project / file
    before = path.read_text()
    after = change(before)
    assert after != before
    path.write_text(after)


@pytest.mark.parametrize(
    "change",
    [nested_parentheses(50), nested_cases(60)],
    ids=["50 nested parentheses", "60 nested CASEs"],
)
def test_a_plausibly_deep_model_builds_runs_and_publishes(fresh: Path, change: Any) -> None:
    edit_model(fresh, DAILY_FILE, change)
    for args in (
        ("build",),
        ("deploy", MODEL, "--force", "--reason", "the same numbers, nested"),
        ("backfill", MODEL, "--partitions", "2025-01-04..2025-01-05"),
        ("status", MODEL),
        ("verify", MODEL),
    ):
        done = tidegate(*args, "--project", fresh)
        assert done.exit_code == 0, (args, done.stderr)


def where(line: str) -> tuple[str, int]:
    """(path, line number) of an `error: PATH:LINE: …` line."""
    path, number, _ = line.removeprefix("error: ").split(":", 2)
    return path, int(number)


def sql_line(project: Path, file: str, needle: str) -> int:
    found = [
        n for n, text in enumerate((project / file).read_text().splitlines(), 1) if needle in text
    ]
    assert found, needle
    return found[0]


@pytest.mark.parametrize(
    "change",
    [nested_parentheses(10_000), nested_cases(1_000), nested_parentheses(201)],
    ids=["10 000 parentheses", "1 000 CASEs", "201 parentheses"],
)
def test_an_absurdly_deep_model_is_refused_naming_its_file_and_line(
    fresh: Path, change: Any
) -> None:
    edit_model(fresh, DAILY_FILE, change)
    before = state_dump(fresh), warehouse_dump(fresh)
    for args in (("build",), ("status",), ("run", MODEL)):
        line = refused(fresh, args, before)
        assert where(line) == (DAILY_FILE, sql_line(fresh, DAILY_FILE, " AS order_count")), line
        assert "nested" in line and "200" in line, line


def test_sql_that_does_not_parse_once_written_out_is_refused_at_build(fresh: Path) -> None:
    """sqlglot writes `~ ~ x` as `~~x`, which reads back as a LIKE: the version would be
    recorded, then every deploy and run would fail parsing it. Refused by build instead, before
    any version is recorded."""
    edit_model(fresh, DAILY_FILE, lambda sql: sql.replace(COUNT, "~ ~ " + COUNT))
    before = state_dump(fresh), warehouse_dump(fresh)
    line = refused(fresh, ("build",), before)
    assert line.startswith(f"error: {DAILY_FILE}:") and "written out" in line, line


@pytest.mark.parametrize(
    ("file", "old", "new", "key"),
    [
        (
            DAILY_FILE,
            'expression = "net_revenue <= gross_revenue"',
            'expression = "' + "(" * 3000 + "net_revenue <= gross_revenue" + ")" * 3000 + '"',
            "checks[2]: expression",
        ),
        (
            MONTHLY_FILE,
            'source_expression = "sum(order_count)"',
            'source_expression = "' + "abs(" * 300 + "sum(order_count)" + ")" * 300 + '"',
            "reconciliations[0]: source_expression",
        ),
    ],
    ids=["check expression", "reconciliation expression"],
)
def test_deeply_nested_sql_in_a_header_is_refused(
    fresh: Path, file: str, old: str, new: str, key: str
) -> None:
    edit_model(fresh, file, lambda text: text.replace(old, new))
    before = state_dump(fresh), warehouse_dump(fresh)
    line = refused(fresh, ("build",), before)
    assert line.startswith(f"error: {file}:") and key in line and "nested" in line, line


def test_a_deep_query_check_and_update_set_are_refused(fresh: Path) -> None:
    deep = "(" * 3000 + "1" + ")" * 3000
    edit_model(
        fresh,
        DAILY_FILE,
        lambda text: text.replace(
            "# Reconciled per partition",
            f'[[checks]]\nname = "deep"\ntype = "query"\nsql = "SELECT {deep} AS order_date"\n\n'
            "# Reconciled per partition",
        ),
    )
    before = state_dump(fresh), warehouse_dump(fresh)
    line = refused(fresh, ("build",), before)
    assert line.startswith(f"error: {DAILY_FILE}:") and "checks[3]: sql" in line, line
    assert "nested" in line, line
    edit_model(fresh, DAILY_FILE, lambda text: text.replace(deep, "1"))
    (fresh / "models" / "fill.toml").write_text(
        'write_mode = "update"\ntable = "orders"\ngrain = "range"\nkey_column = "order_id"\n'
        f'chunk_size = 100\n\n[set]\ndiscount = "{deep}"\n'
    )
    line = refused(fresh, ("build",), before)
    assert line.startswith("error: models/fill.toml:") and "nested" in line, line


# -- files that are not text, TOML nested too deeply, Python the parser gives up on ------------


@pytest.mark.parametrize(
    ("file", "content", "expected"),
    [
        (DAILY_FILE, b"/* tidegate\ngrain = 'day'\n*/\nSELECT '\xff' AS x\n", "UTF-8"),
        ("tidegate.toml", b"[project]\nname = '\xff'\n", "UTF-8"),
        ("models/extra.py", b"x = '\xff'\n", "UTF-8"),
        ("models/extra.toml", b"kind = 'command'\n# \xfe\n", "UTF-8"),
        ("tidegate.toml", b"[project]\nname = 'x'\nx = " + b"[" * 5000 + b"]" * 5000, "nested"),
        (
            "models/extra.toml",
            b"kind = 'command'\nx = " + b"{a = " * 5000 + b"1" + b"}" * 5000,
            "nested",
        ),
        (
            DAILY_FILE,
            b"/* tidegate\ngrain = 'day'\nx = " + b"[" * 5000 + b"]" * 5000 + b"\n*/\nSELECT 1",
            "nested",
        ),
        ("models/extra.py", b"x = " + b"-" * 200_000 + b"1\n", "Python"),
        ("models/extra.py", b"x = " + b"(" * 300 + b"1" + b")" * 300 + b"\n", "Python"),
        ("models/extra.py", b"import os\x00\n", "Python"),
    ],
    ids=[
        "SQL model not UTF-8",
        "tidegate.toml not UTF-8",
        "Python model not UTF-8",
        "TOML model not UTF-8",
        "tidegate.toml nested",
        "TOML model nested",
        "SQL model header nested",
        "Python unary chain",
        "Python parentheses",
        "Python NUL",
    ],
)
def test_a_project_file_its_parser_gives_up_on_is_refused_naming_it(
    fresh: Path, file: str, content: bytes, expected: str
) -> None:
    (fresh / file).write_bytes(content)
    before = state_dump(fresh), warehouse_dump(fresh)
    line = refused(fresh, ("build",), before)
    assert file in line and expected in line, line
    if expected == "UTF-8":
        bad = next(at for at, byte in enumerate(content) if byte >= 0x80)
        assert where(line)[1] == content.count(b"\n", 0, bad) + 1, line


def test_a_python_model_in_the_encoding_it_declares_builds(fresh: Path) -> None:
    """Text is UTF-8 unless a Python module says otherwise, as Python reads it."""
    source = (PROGRAMS / "daily_revenue.py").read_text()
    (fresh / "models" / "py_revenue.py").write_bytes(
        b"# -*- coding: latin-1 -*-\n# revenue in \xe9cus\n" + source.encode()
    )
    done = tidegate("build", "--project", fresh)
    assert done.exit_code == 0, done.stderr


# -- model files past the size limit -----------------------------------------------------------

LIMIT_HINT = "raise [limits] model_file_bytes in tidegate.toml"


def padded(text: str, size: int, comment: str) -> str:
    """`text` with a trailing comment that makes it `size` bytes long."""
    opened = f"\n{comment} "
    return text + opened + "x" * (size - len(text.encode()) - len(opened))


@pytest.mark.parametrize(
    ("file", "comment"),
    [(DAILY_FILE, "--"), ("models/extra.py", "#"), ("models/extra.toml", "#")],
    ids=["SQL", "Python", "TOML"],
)
def test_a_model_file_past_the_default_limit_is_refused_before_it_is_parsed(
    fresh: Path, file: str, comment: str
) -> None:
    path = fresh / file
    # not a model at all past its first line: refused for its size, it is never parsed
    path.write_text(f"{comment} too big\n" + "(" * 1_000_000)
    size = path.stat().st_size
    before = state_dump(fresh), warehouse_dump(fresh)
    for args in (("build",), ("status",)):
        line = refused(fresh, args, before)
        assert line == (
            f"error: {file}: model file is {size:,} bytes, larger than the limit of "
            f"1,000,000 ({LIMIT_HINT})"
        ), line


def test_the_limit_is_set_in_tidegate_toml(fresh: Path) -> None:
    config = fresh / "tidegate.toml"
    original = config.read_text()
    daily = fresh / DAILY_FILE
    size = daily.stat().st_size
    config.write_text(original + f"\n[limits]\nmodel_file_bytes = {size - 1}\n")
    before = state_dump(fresh), warehouse_dump(fresh)
    line = refused(fresh, ("build",), before)
    assert f"{DAILY_FILE}: model file is {size:,} bytes" in line and f"{size - 1:,}" in line
    config.write_text(original + f"\n[limits]\nmodel_file_bytes = {size}\n")
    done = tidegate("build", "--project", fresh)
    assert done.exit_code == 0, done.stderr


@pytest.mark.parametrize("value", ["0", "-1", '"1MB"', "1.5", "true", "{}"])
def test_a_bad_limit_is_refused_naming_its_line(fresh: Path, value: str) -> None:
    config = fresh / "tidegate.toml"
    text = config.read_text() + f"\n[limits]\nmodel_file_bytes = {value}\n"
    config.write_text(text)
    before = state_dump(fresh), warehouse_dump(fresh)
    line = refused(fresh, ("build",), before)
    assert "limits.model_file_bytes" in line, line
    assert where(line)[1] == len(text.splitlines()), line


def test_a_huge_tidegate_toml_is_refused_before_it_is_parsed(fresh: Path) -> None:
    config = fresh / "tidegate.toml"
    config.write_text(padded(config.read_text(), 1_000_001, "#"))
    before = state_dump(fresh), warehouse_dump(fresh)
    line = refused(fresh, ("status",), before)
    assert (
        "tidegate.toml: the project file is 1,000,001 bytes, larger than the limit of 1,000,000"
        in line
    ), line
