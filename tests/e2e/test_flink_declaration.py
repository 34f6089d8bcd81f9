"""Flink stream models through the CLI where PyFlink is not installed (the dev environment):
`init --example flink` scaffolds the example, `build` refuses it in one line and records
nothing, and a bad declaration is named by file and line before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import Result, tidegate
from tidegate.project.flink_model import installed_flink

MODEL_FILE = "models/orders_per_day.toml"


@pytest.fixture
def without_pyflink() -> None:
    """The refusal of an environment without PyFlink: the tests' own environment has none (the
    Flink tests install it into one of their own), and a test here fails rather than skip."""
    assert installed_flink() is None, "PyFlink is installed beside the tests' tidegate"


@pytest.fixture
def stream(tmp_path: Path) -> Path:
    project = tmp_path / "stream"
    result = tidegate("init", project, "--example", "flink")
    assert result.exit_code == 0, result.stderr
    return project


def one_line_error(result: Result) -> str:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: "), line
    return line


def line_of(project: Path, text: str) -> int:
    lines = (project / MODEL_FILE).read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def assert_nothing_written(project: Path) -> None:
    # build refuses before the ledger is opened: no ledger at all, hence no version
    assert not (project / ".tidegate" / "state.db").exists()
    history = tidegate("history", "orders_per_day", "--json", "--project", project)
    assert history.exit_code == 0, history.stderr
    assert history.json()["events"] == []
    status = tidegate("status", "--json", "--project", project)
    assert status.exit_code == 0, status.stderr
    [model] = status.json()["models"]
    assert (model["model"], model["active_version"], model["stream"]) == (
        "orders_per_day",
        None,
        None,
    )


def test_init_scaffolds_the_flink_example(stream: Path) -> None:
    for path in (
        "tidegate.toml",
        "write_orders.py",
        MODEL_FILE,
        "jobs/orders_per_day.py",
        "story/orders_per_day_v2.py",
    ):
        assert (stream / path).is_file(), path
    assert 'kind = "flink"' in (stream / MODEL_FILE).read_text()
    assert "def build(env" in (stream / "jobs" / "orders_per_day.py").read_text()
    ignored = (stream / ".gitignore").read_text().splitlines()
    assert {"in/", "out/", "state/"} <= set(ignored)


@pytest.mark.usefixtures("without_pyflink")
def test_build_without_pyflink_refuses_in_one_line_and_records_nothing(stream: Path) -> None:
    line = one_line_error(tidegate("build", "--project", stream))
    assert MODEL_FILE in line
    assert "pip install 'tidegate[flink]'" in line
    assert_nothing_written(stream)


@pytest.mark.usefixtures("without_pyflink")
def test_build_json_without_pyflink_refuses_too(stream: Path) -> None:
    result = tidegate("build", "--json", "--project", stream)
    assert result.exit_code == 2
    document = result.json()
    assert (document["schema"], document["exit_code"]) == ("tidegate.error/v1", 2)
    assert document["error"].startswith(f"{MODEL_FILE}: ")
    assert document["error"].endswith("pip install 'tidegate[flink]'")
    assert not (stream / ".tidegate" / "state.db").exists()


def declare(project: Path, old: str, new: str) -> str:
    """Replace `old` in the example's declaration; the declaration as it was."""
    path = project / MODEL_FILE
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    return text


PARALLELISM = "parallelism = 1"

BAD_DECLARATIONS = [
    # (replace, with, the line's text afterwards, the message)
    (
        "orders_per_day.py:build",
        "orders_per_day.py",
        "job =",
        "job: String should match pattern",
    ),
    ("jobs/orders_per_day.py:build", "jobs/nope.py:build", "job =", "job: jobs/nope.py is not"),
    (PARALLELISM, "parallelism = 0", "parallelism =", "parallelism: Input should be greater"),
    (
        PARALLELISM,
        PARALLELISM + '\nschedule = "0 * * * *"',
        "schedule =",
        "schedule: not for a Flink model",
    ),
    (
        PARALLELISM,
        PARALLELISM + '\ntime_column = "day"',
        "time_column =",
        "time_column: not for a Flink model",
    ),
    (
        PARALLELISM,
        PARALLELISM + '\nenv = ["LAKE_TOKEN", "NOT-A-NAME"]',
        "env =",
        "env: 'NOT-A-NAME' is not a variable name",
    ),
    (
        PARALLELISM,
        PARALLELISM + '\nenv = ["PGPASSWORD"]',
        "env =",
        "env: PGPASSWORD holds libpq's password variable; tidegate's secrets are never given",
    ),
    ('path = "out/orders_per_day"\n', "", "[output]", "output.path: required key is missing"),
    ('format = "csv"', 'format = "parquet"', "format =", "output.format: Input should be 'csv'"),
]


@pytest.mark.parametrize(("old", "new", "at", "message"), BAD_DECLARATIONS)
def test_a_bad_declaration_is_named_by_file_and_line(
    stream: Path, old: str, new: str, at: str, message: str
) -> None:
    good = declare(stream, old, new)
    line = one_line_error(tidegate("build", "--project", stream))
    assert f"{MODEL_FILE}:{line_of(stream, at)}: " in line, line
    assert message in line, line
    # every command reads the declaration: the ledger is read with the good one back
    (stream / MODEL_FILE).write_text(good)
    assert_nothing_written(stream)


def test_stream_start_refuses_a_model_that_is_not_a_stream(tmp_path: Path) -> None:
    project = tmp_path / "orders"
    assert tidegate("init", project, "--example", "orders").exit_code == 0
    line = one_line_error(tidegate("stream", "start", "daily_revenue", "--project", project))
    assert "daily_revenue is not a stream model" in line
    unknown = one_line_error(tidegate("stream", "start", "nosuch", "--project", project))
    assert "unknown model 'nosuch'" in unknown


def test_show_partition_of_a_stream_points_at_status_and_history(stream: Path) -> None:
    for _ in range(2):  # the project loaded, then read from the project cache
        line = one_line_error(
            tidegate("show", "partition", "orders_per_day", "all", "--project", stream)
        )
        assert "is a stream: it has no partitions" in line, line


@pytest.mark.usefixtures("without_pyflink")
def test_the_supervisor_needs_pyflink(stream: Path) -> None:
    line = one_line_error(tidegate("stream", "start", "orders_per_day", "--project", stream))
    assert "needs PyFlink beside tidegate: pip install 'tidegate[flink]'" in line, line
    assert not (stream / ".tidegate" / "streams").exists()
