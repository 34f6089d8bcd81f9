"""The write mode and unique key of a model file: what the loader accepts, and the one line
(file, line, field) it stops at otherwise."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.kit import example_project, tidegate
from tidegate.domain.errors import ConfigError
from tidegate.domain.model import WriteMode
from tidegate.execution.audit import KEY_CHECK, builtin_checks
from tidegate.project.loader import load_project

DAILY = Path("models") / "daily_revenue.sql"
KEY_LINE = 'unique_key = ["order_date", "status"]\n'


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return example_project(tmp_path_factory.mktemp("write_modes") / "proj", deploy=False)


@pytest.fixture
def root(template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "proj"
    shutil.copytree(template, copy)
    return copy


def header(root: Path, old: str, new: str) -> None:
    path = root / DAILY
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))


def line_of(root: Path, marker: str) -> int:
    [line] = [n for n, t in enumerate((root / DAILY).read_text().splitlines(), 1) if marker in t]
    return line


def refused(root: Path) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        load_project(root)
    assert "\n" not in str(raised.value)
    return raised.value


@pytest.mark.parametrize("mode", ["overwrite", "merge", "append"])
def test_each_write_mode_loads(root: Path, mode: str) -> None:
    header(root, KEY_LINE, f'{KEY_LINE}write_mode = "{mode}"\n')
    spec = load_project(root).models["daily_revenue"]
    assert spec.write_mode is WriteMode(mode)
    assert spec.unique_key == ("order_date", "status")


def test_the_default_write_mode_is_overwrite(root: Path) -> None:
    assert load_project(root).models["daily_revenue"].write_mode is WriteMode.OVERWRITE


def test_append_without_a_unique_key_loads(root: Path) -> None:
    header(root, KEY_LINE, 'write_mode = "append"\n')
    spec = load_project(root).models["daily_revenue"]
    assert (spec.write_mode, spec.unique_key) == (WriteMode.APPEND, ())
    assert spec.duplicates_on_republish and not spec.keyed_write


def test_merge_without_a_unique_key_is_refused(root: Path) -> None:
    header(root, KEY_LINE, 'write_mode = "merge"\n')
    error = refused(root)
    assert error.line == line_of(root, 'write_mode = "merge"')
    assert "merge needs unique_key" in str(error)
    assert str(error).startswith(f"{DAILY}:{error.line}: write_mode:")


def test_an_unknown_write_mode_is_refused(root: Path) -> None:
    header(root, KEY_LINE, f'{KEY_LINE}write_mode = "upsert"\n')
    error = refused(root)
    assert error.line == line_of(root, 'write_mode = "upsert"')
    assert "write_mode" in str(error) and "'merge'" in str(error)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ('["order_date", "region"]', "unique_key: 'region' is not in columns"),
        ('["status", "status"]', "unique_key: repeated column"),
    ],
)
def test_a_unique_key_names_output_columns_once(root: Path, key: str, message: str) -> None:
    header(root, KEY_LINE, f'unique_key = {key}\nwrite_mode = "merge"\n')
    error = refused(root)
    assert message in str(error)
    assert error.line == line_of(root, "unique_key =")


@pytest.mark.parametrize("mode", ["merge", "append"])
def test_a_key_matched_write_needs_a_not_null_key(root: Path, mode: str) -> None:
    header(root, KEY_LINE, f'{KEY_LINE}write_mode = "{mode}"\n')
    header(root, 'status = "VARCHAR NOT NULL"', 'status = "VARCHAR"')
    error = refused(root)
    assert f"unique_key: 'status' must be NOT NULL in columns: {mode}" in str(error)
    assert error.line == line_of(root, "unique_key =")


def test_an_overwrite_may_keep_a_nullable_key(root: Path) -> None:
    header(root, 'status = "VARCHAR NOT NULL"', 'status = "VARCHAR"')
    assert load_project(root).models["daily_revenue"].unique_key == ("order_date", "status")


def test_the_cli_says_it_in_one_line_with_exit_2(root: Path) -> None:
    header(root, KEY_LINE, 'write_mode = "merge"\n')
    result = tidegate("build", "--project", root)
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "write_mode: merge needs unique_key" in line


def test_the_write_mode_is_part_of_the_version(root: Path) -> None:
    before = load_project(root).models["daily_revenue"].config()
    header(root, KEY_LINE, f'{KEY_LINE}write_mode = "merge"\n')
    after = load_project(root).models["daily_revenue"].config()
    assert (before["write_mode"], after["write_mode"]) == ("overwrite", "merge")


def test_the_key_check_runs_only_when_no_declared_check_implies_it(root: Path) -> None:
    """The example declares a blocking unique check on its key: a merge reuses it. Without it
    (or with it only a warning), the write adds its own."""
    header(root, KEY_LINE, f'{KEY_LINE}write_mode = "merge"\n')
    spec = load_project(root).models["daily_revenue"]
    assert [c.name for c in builtin_checks(spec)] == ["partition_bounds"]
    header(
        root,
        'type = "unique"\ncolumns = ["order_date", "status"]\n',
        'type = "unique"\ncolumns = ["order_date", "status"]\nseverity = "warn"\n',
    )
    spec = load_project(root).models["daily_revenue"]
    added = [c for c in builtin_checks(spec) if c.name == KEY_CHECK]
    assert [(c.kind, c.params["columns"]) for c in added] == [("unique", ["order_date", "status"])]
