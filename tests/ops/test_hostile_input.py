"""Bad input to every command that takes it, each refused with one line, the exit code of SPEC
§6 and nothing written (the ledger and the warehouse compared row for row before and after):

- ranges — reversed, impossible, malformed, crafted for SQL injection, absurdly long — given to
  every command that takes a range, and any text at all (hypothesis) to `backfill --dry-run`;
- tidegate.toml with any value replaced by any TOML value, or any text spliced in (hypothesis;
  the model headers have their own property in test_bad_config.py);
- a ledger from a newer tidegate and a corrupted or truncated ledger file, to every command;
- a source whose schema drifted (column dropped, renamed or retyped to text) under a published
  model: a backfill, a resume and a rerun (and their dry runs) are refused before they start
  (exit 3) naming the column or function, and nothing is written; an added column is harmless.
  (A retype the model's casts absorb, DOUBLE for DECIMAL, is not drift the output shows: the
  reconciliations, exact to the cent, judge the values.)
"""

from __future__ import annotations

import random
import re
import shutil
import signal
import sqlite3
from collections.abc import Iterator
from datetime import date
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.hostile_kit import MODEL, PUBLISHED, Dumps
from tests.kit import (
    Result,
    example_project,
    oracle_daily_revenue,
    published_daily_revenue,
    spawn,
    state_dump,
    tidegate,
    warehouse_dump,
    warehouse_execute,
)
from tidegate.crash import ENVIRONMENT_VARIABLE
from tidegate.state.sqlite import SCHEMA_VERSION


def run_id(project: Path) -> str:
    listed = tidegate("backfill", "list", "--json", "--project", project)
    return str(listed.json()["runs"][0]["run_id"])


def refused(project: Path, args: tuple[str, ...], before: Dumps, code: int = 2) -> str:
    """Run `args`; it must exit `code` with one line on stderr and leave both stores `before`."""
    result = tidegate(*args, "--project", project)
    assert result.exit_code == code, (args, result)
    assert result.stdout == "", result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert (state_dump(project), warehouse_dump(project)) == before, f"{args} wrote"
    return lines[0]


# -- ranges, to every command that takes one ---------------------------------------------------

BAD_RANGES = {
    "reversed": "2025-03-05..2025-03-01",
    "impossible day": "2025-02-30..2025-03-01",
    "open end": "2025-01-01..",
    "open start": "..2025-01-02",
    "empty": "",
    "three ends": "2025-01-01..2025-01-02..2025-01-03",
    "quote injection": "2025-01-01'; DROP TABLE orders; --",
    "boolean injection": "2025-01-01 OR 1=1..2025-01-02",
    "comment injection": "2025-01-01/*..*/2025-01-02",
    "year 10000": "9999-12-31..10000-01-01",
    "month for a day model": "2025-01..2025-02",
    "time of day": "2025-01-01T03:00..2025-01-02",
    "full-width digits": "２０２５-01-01..2025-01-02",
    "line break": "2025-01-01\n..2025-01-02",
    "a thousand characters": "2025-01-01.." + "9" * 1000,
}


# any day of the calendar, its first and last days likely: those past the dates tidegate
# handles are refused, the others plan (or are before the model's start)
CALENDAR = st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31))


def range_commands(project: Path, partitions: str) -> dict[str, tuple[str, ...]]:
    return {
        "backfill": ("backfill", MODEL, "--partitions", partitions),
        "run": ("run", MODEL, "--partition", partitions),
        "rerun": ("rerun", run_id(project), "--partitions", partitions, "--approve", "x"),
        "taint": ("taint", MODEL, "--partitions", partitions, "--reason", "x"),
        "recover": ("recover", MODEL, "--partitions", partitions),
        "validate": ("validate", MODEL, "--partitions", partitions),
        "diff": ("diff", MODEL, "--left", "v1", "--right", "v1", "--partitions", partitions),
        "ack": ("ack", "finance", MODEL, "--partitions", partitions),
        "show": ("show", "partition", MODEL, partitions),
    }


COMMANDS = ("backfill", "run", "rerun", "taint", "recover", "validate", "diff", "ack", "show")
# every bad range to the two commands that start runs; to the others, a few (one parser reads
# every range, so these show that each command goes through it before touching anything)
EACH = ("reversed", "quote injection", "line break", "full-width digits")
CASES = [(c, name) for c in ("backfill", "run") for name in BAD_RANGES] + [
    (c, name) for c in COMMANDS[2:] for name in EACH
]


@pytest.mark.parametrize(("command", "case"), CASES, ids=[f"{c}-{n}" for c, n in CASES])
def test_a_bad_range_is_refused_by_every_command(
    shared: Path, baseline: Dumps, command: str, case: str
) -> None:
    bad = BAD_RANGES[case]
    line = refused(shared, range_commands(shared, bad)[command], baseline)
    assert "Traceback" not in line and "internal error" not in line, line


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    text=st.text(max_size=40)
    | st.from_regex(r"\d{4}-\d\d-\d\d\.\.\d{4}-\d\d-\d\d")
    | st.tuples(CALENDAR, CALENDAR).map(lambda ends: f"{ends[0]}..{ends[1]}")
    | CALENDAR.map(str)
)
@example(text="2025-01-05..2025-01-04")
@example(text="9999-12-31")
@example(text="2025-01-01..9999-12-31")
@example(text="0001-01-01..2025-01-01")
@example(text="9998-12-31")
def test_any_range_text_plans_or_is_refused_and_writes_nothing(
    shared: Path, baseline: Dumps, text: str
) -> None:
    result = tidegate("backfill", MODEL, "--partitions", text, "--dry-run", "--project", shared)
    assert result.exit_code in (0, 2), result
    if result.exit_code == 2:
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result
    assert "Traceback" not in result.stderr
    assert (state_dump(shared), warehouse_dump(shared)) == baseline


# -- tidegate.toml, fuzzed -------------------------------------------------------------------

ASSIGNMENT = re.compile(r"^(?P<key>[A-Za-z_][\w.]*\s*=\s*)(?P<value>.+)$", re.MULTILINE)
# strings without path separators or dots, so a fuzzed path stays inside the project
STRINGS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\\."),
    max_size=20,
)
SCALARS = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(str),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "0.5", "true", "false", "1979-05-27"]),
    STRINGS.map(lambda s: '"' + s.replace("\\", "").replace('"', '\\"') + '"'),
    STRINGS.map(lambda s: "'" + s.replace("'", "").replace("\n", "") + "'"),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), inner, max_size=3).map(
            lambda d: "{" + ", ".join(f"{k} = {v}" for k, v in d.items()) + "}"
        ),
    ),
    max_leaves=6,
)


@st.composite
def configs(draw: st.DrawFn, original: str) -> str:
    """The project's tidegate.toml with one value replaced by any TOML value, or any text (TOML
    punctuation likely) spliced in at a line."""
    if draw(st.booleans()):
        spots = list(ASSIGNMENT.finditer(original))
        spot = draw(st.sampled_from(spots))
        value = draw(VALUES)
        return original[: spot.start("value")] + value + original[spot.end("value") :]
    lines = original.splitlines(keepends=True)
    at = draw(st.integers(0, len(lines)))
    junk = draw(st.text(alphabet=list('[]="{},.# \nabcdeghknoprstuvwy_0123456789-'), max_size=50))
    return "".join([*lines[:at], junk, "\n", *lines[at:]])


@pytest.fixture(scope="module")
def unbuilt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    project = example_project(tmp_path_factory.mktemp("toml-fuzz") / "proj", deploy=False)
    # a value of its own for the fuzz to replace
    config = project / "tidegate.toml"
    config.write_text(config.read_text() + "\n[limits]\nmodel_file_bytes = 1000000\n")
    yield project


EXAMPLE_CONFIG = (resources.files("tidegate") / "examples" / "orders" / "tidegate.toml").read_text()


@settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_any_tidegate_toml_builds_or_is_refused_in_one_line(
    unbuilt: Path, data: st.DataObject
) -> None:
    config = unbuilt / "tidegate.toml"
    original = (
        config.read_text()
        if not (unbuilt / "original.toml").exists()
        else (unbuilt / "original.toml").read_text()
    )
    (unbuilt / "original.toml").write_text(original)
    config.write_text(data.draw(configs(original)), encoding="utf-8")
    before = (state_dump(unbuilt), warehouse_dump(unbuilt))
    try:
        result = tidegate("build", "--project", unbuilt)
        assert result.exit_code in (0, 2), result
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result
        if result.exit_code == 2:
            assert result.stderr.count("\n") == 1, result.stderr
            assert (state_dump(unbuilt), warehouse_dump(unbuilt)) == before
    finally:
        config.write_text(original)
        shutil.rmtree(unbuilt / ".tidegate", ignore_errors=True)


# -- the ledger file -------------------------------------------------------------------------

EVERY_COMMAND = [
    ("status",),
    ("status", MODEL),
    ("history", MODEL),
    ("build",),
    ("deploy", MODEL),
    ("backfill", MODEL, "--partitions", "2025-01-04..2025-01-05"),
    ("backfill", "list"),
    ("run", MODEL, "--partition", "2025-01-04"),
    ("taint", MODEL, "--partitions", PUBLISHED, "--reason", "x"),
    ("recover", MODEL),
    ("report", "--out", "report.html"),
]


def newer(project: Path) -> None:
    con = sqlite3.connect(project / ".tidegate" / "state.db")
    con.execute("INSERT INTO schema_migrations (version) VALUES (?)", (SCHEMA_VERSION + 3,))
    con.commit()
    con.close()


def corrupted(project: Path) -> None:
    (project / ".tidegate" / "state.db").write_bytes(random.Random(7).randbytes(16384))


def truncated(project: Path) -> None:
    path = project / ".tidegate" / "state.db"
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file
    con.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


@pytest.mark.parametrize("args", EVERY_COMMAND, ids=[" ".join(a) for a in EVERY_COMMAND])
@pytest.mark.parametrize("damage", [newer, corrupted, truncated])
def test_a_ledger_from_a_newer_tidegate_or_damaged_is_refused_by_every_command(
    fresh: Path, args: tuple[str, ...], damage: object
) -> None:
    assert callable(damage)
    damage(fresh)
    state = fresh / ".tidegate" / "state.db"
    ledger_bytes = state.read_bytes()
    warehouse = warehouse_dump(fresh)
    result = tidegate(*args, "--project", fresh)
    assert result.exit_code == 2, (args, result)
    [line] = result.stderr.splitlines()
    assert str(Path(".tidegate") / "state.db") in line, line
    if damage is newer:
        assert f"v{SCHEMA_VERSION + 3}" in line and "upgrade tidegate" in line, line
    else:
        assert "restore it from a backup or move it aside" in line, line
    assert state.read_bytes() == ledger_bytes, "the ledger file was touched"
    assert warehouse_dump(fresh) == warehouse
    assert not (fresh / "report.html").exists()


# -- schema drift in a source ----------------------------------------------------------------

DRIFTS = {
    "column dropped": ("ALTER TABLE orders DROP COLUMN discount", "discount"),
    "column renamed": ("ALTER TABLE orders RENAME COLUMN refund TO refunds", "refund"),
    "column retyped to text": ("ALTER TABLE orders ALTER gross_amount TYPE VARCHAR", "sum"),
}


@pytest.mark.parametrize("case", list(DRIFTS))
def test_a_source_that_drifted_is_refused_before_anything_starts(fresh: Path, case: str) -> None:
    """Every partition would fail the same way: the run is refused up front, with the reason,
    instead of failing partition after partition into a failed run."""
    statement, named = DRIFTS[case]
    warehouse_execute(fresh, statement)
    ledger, warehouse = state_dump(fresh), warehouse_dump(fresh)
    for args in (
        ("backfill", MODEL, "--partitions", "2025-01-04..2025-01-06"),
        ("backfill", MODEL, "--partitions", "2025-01-04..2025-01-06", "--dry-run"),
        ("rerun", run_id(fresh), "--partitions", PUBLISHED, "--approve", "x"),
        ("rerun", run_id(fresh), "--partitions", PUBLISHED, "--dry-run"),
    ):
        result: Result = tidegate(*args, "--project", fresh, "--json")
        assert result.exit_code == 3, (args, result)
        [line] = result.stderr.splitlines()
        assert "cannot run against the warehouse as it is now, nothing started" in line, line
        assert named in line, line
        assert state_dump(fresh) == ledger, f"{args} wrote to the ledger"
        assert warehouse_dump(fresh) == warehouse, f"{args} wrote to the warehouse"


def test_a_run_cut_short_is_refused_resume_while_its_source_drifted(fresh: Path) -> None:
    """A backfill killed after its first partition, then its source drifts: resume is refused
    up front and the run stays resumable; once the source is repaired it finishes."""
    started = spawn(
        "backfill",
        MODEL,
        "--partitions",
        "2025-01-04..2025-01-06",
        "--batch-size",
        "1",
        "--max-concurrency",
        "1",
        "--project",
        fresh,
        env={ENVIRONMENT_VARIABLE: "after_ledger:1"},
    )
    started.communicate(timeout=120)
    assert started.returncode == -signal.SIGKILL, started.returncode
    cut_short = run_id(fresh)
    published = published_daily_revenue(fresh)
    warehouse_execute(fresh, "ALTER TABLE orders RENAME COLUMN refund TO refunds")
    result = tidegate("backfill", "resume", cut_short, "--project", fresh)
    assert result.exit_code == 3, result
    [line] = result.stderr.splitlines()
    assert "cannot run against the warehouse as it is now" in line and "refund" in line, line
    assert published_daily_revenue(fresh) == published
    warehouse_execute(fresh, "ALTER TABLE orders RENAME COLUMN refunds TO refund")
    done = tidegate("backfill", "resume", cut_short, "--project", fresh)
    assert done.exit_code == 0, done.stderr
    oracle = [r for r in oracle_daily_revenue(fresh) if str(r[0]) <= "2025-01-06"]
    assert published_daily_revenue(fresh) == oracle


def test_an_added_source_column_is_harmless(fresh: Path) -> None:
    warehouse_execute(fresh, "ALTER TABLE orders ADD COLUMN channel VARCHAR DEFAULT 'web'")
    done = tidegate("backfill", MODEL, "--partitions", "2025-01-04..2025-01-06", "--project", fresh)
    assert done.exit_code == 0, done.stderr
    oracle = [r for r in oracle_daily_revenue(fresh) if str(r[0]) <= "2025-01-06"]
    assert published_daily_revenue(fresh) == oracle
