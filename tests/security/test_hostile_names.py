"""Names that are not plain identifiers — columns, checks, keys, sources, models — are refused
with exit 2, one line, and nothing written (docs/design.md §5 G6, §7)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.kit import example_project, state_dump, tidegate
from tidegate.project.config import IDENTIFIER

DROP = 'x"; DROP TABLE orders; --'
CLASSICS = [DROP, "x'); DROP TABLE orders; --", "two words", "1st", "a-b", "a.b", "", "é", "a" * 64]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One project for many refused builds: each test restores the files it changes."""
    yield example_project(tmp_path_factory.mktemp("hostile") / "proj", deploy=False)


@pytest.fixture
def proj(shared: Path) -> Iterator[Path]:
    files = {
        p: p.read_text() for p in [shared / "tidegate.toml", *(shared / "models").glob("*.sql")]
    }
    yield shared
    for extra in (shared / "models").glob("*.sql"):
        if extra not in files:
            extra.unlink()
    for path, text in files.items():
        path.write_text(text)
    # a build that was wrongly accepted made a ledger: remove it so the next test starts clean
    shutil.rmtree(shared / ".tidegate", ignore_errors=True)


def toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_refused(project: Path, *needles: str) -> str:
    warehouse = file_digest(project / "warehouse.duckdb")
    result = tidegate("build", "--project", project)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert state_dump(project) == {}  # not even a ledger was created
    assert file_digest(project / "warehouse.duckdb") == warehouse
    return lines[0]


def daily(project: Path) -> Path:
    return project / "models" / "daily_revenue.sql"


# Line breaks are left to their own test: they also test the one-line message.
hostile_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=0, max_size=24
).filter(lambda s: not IDENTIFIER.match(s))


def test_the_unedited_project_builds(undeployed_project: Path) -> None:
    result = tidegate("build", "--project", undeployed_project)
    assert result.exit_code == 0, result.stderr


@settings(max_examples=40, deadline=None)
@given(name=hostile_names)
@example(name=DROP)
@example(name="*/")
def test_a_hostile_column_name_is_refused(shared: Path, name: str) -> None:
    path = daily(shared)
    original = path.read_text()
    # `*/` ends the header comment where it stands: the header is then unterminated TOML
    reason = "not a plain identifier" if "*/" not in name else "Unterminated string"
    try:
        edit(path, 'order_count = "BIGINT NOT NULL"', f'{toml_string(name)} = "BIGINT NOT NULL"')
        assert_refused(shared, "models/daily_revenue.sql", reason)
    finally:
        path.write_text(original)
        shutil.rmtree(shared / ".tidegate", ignore_errors=True)


@pytest.mark.parametrize("name", ["a\nb", "order_count\u2028DROP TABLE orders"])
def test_a_column_name_with_a_line_break_is_refused_in_one_line(proj: Path, name: str) -> None:
    edit(daily(proj), 'order_count = "BIGINT NOT NULL"', f'{toml_string(name)} = "BIGINT NOT NULL"')
    assert_refused(proj, "models/daily_revenue.sql", "not a plain identifier")


@pytest.mark.parametrize("name", CLASSICS)
def test_a_hostile_column_in_a_check_is_refused(proj: Path, name: str) -> None:
    edit(daily(proj), 'column = "status"', f"column = {toml_string(name)}")
    assert_refused(proj, "checks[1]", "is not in columns")


@pytest.mark.parametrize("name", CLASSICS)
def test_a_hostile_unique_check_column_is_refused(proj: Path, name: str) -> None:
    edit(
        daily(proj),
        'columns = ["order_date", "status"]',
        f'columns = ["order_date", {toml_string(name)}]',
    )
    assert_refused(proj, "checks[0]", "is not in columns")


@pytest.mark.parametrize("name", [DROP, "x'); DROP TABLE orders; --", "two words"])
def test_a_hostile_check_name_is_refused(proj: Path, name: str) -> None:
    edit(daily(proj), 'name = "net_not_above_gross"', f"name = {toml_string(name)}")
    assert_refused(proj, "models/daily_revenue.sql", "checks[2]")


@pytest.mark.parametrize("field", ["time_column", "unique_key"])
@pytest.mark.parametrize("name", CLASSICS)
def test_hostile_partition_and_key_columns_are_refused(proj: Path, field: str, name: str) -> None:
    if field == "time_column":
        edit(daily(proj), 'time_column = "order_date"', f"time_column = {toml_string(name)}")
    else:
        edit(
            daily(proj),
            'unique_key = ["order_date", "status"]',
            f"unique_key = [{toml_string(name)}]",
        )
    assert_refused(proj, field, *(["is not in columns"] if name else []))


def test_a_hostile_key_column_is_refused(proj: Path) -> None:
    (proj / "models" / "by_region.sql").write_text(
        '/* tidegate\ngrain = "key"\n'
        f"key_column = {toml_string(DROP)}\n"
        'keys = ["eu"]\n\n[columns]\nregion = "VARCHAR"\n*/\n'
        "SELECT CAST($key AS VARCHAR) AS region\n"
    )
    assert_refused(proj, "key_column", "is not in columns")


@pytest.mark.parametrize(
    "declared",
    [
        "BIGINT); DROP TABLE orders; --",
        "BIGINT NOT NULL DEFAULT 0",
    ],
)
def test_a_column_type_with_trailing_sql_is_refused(proj: Path, declared: str) -> None:
    edit(daily(proj), 'order_count = "BIGINT NOT NULL"', f"order_count = {toml_string(declared)}")
    assert_refused(proj, "columns.order_count")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("[sources.orders]", f"[sources.{toml_string(DROP)}]"),
        ('table = "orders"', f"table = {toml_string(DROP)}"),
        ('time_column = "order_ts"', 'time_column = "order_ts) OR (1 = 1"'),
    ],
)
def test_hostile_source_names_are_refused(proj: Path, old: str, new: str) -> None:
    edit(proj / "tidegate.toml", old, new)
    assert_refused(proj, "tidegate.toml", "not a plain identifier")


@pytest.mark.parametrize(
    ("file_name", "needle"),
    [
        ("two words", "must be letters, digits and _"),
        ("x;DROP", "must be letters, digits and _"),
        ("run-20250101T000000000000Z-abcdef", "must be letters, digits and _"),
        ("resume", "is reserved"),
        ("list", "is reserved"),
        ("_tidegate_meta", "is reserved"),
    ],
)
def test_hostile_model_names_are_refused(proj: Path, file_name: str, needle: str) -> None:
    (proj / "models" / f"{file_name}.sql").write_text(daily(proj).read_text())
    assert_refused(proj, needle)
