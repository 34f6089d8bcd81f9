"""Hostile input is refused, never crashed on: exit 2, one line `error: …` naming what is wrong
(the file and line, for a project file), and nothing written to the ledger or the warehouse.

- partitions and `--as-of` at the ends of the calendar (a partition whose end, or whose
  neighbour, would be past year 9999 or before year 1), to every command that takes them;
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.kit import example_project, state_dump, tidegate, warehouse_dump, warehouse_execute

MODEL = "daily_revenue"
MONTHLY = "monthly_revenue"
PUBLISHED = "2025-01-01..2025-01-02"
DAILY_FILE = "models/daily_revenue.sql"
MONTHLY_FILE = "models/monthly_revenue.sql"

Dumps = tuple[dict[str, list[tuple[Any, ...]]], dict[str, list[tuple[Any, ...]]]]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The orders example with two days of daily_revenue published, and a consumer."""
    project = example_project(tmp_path_factory.mktemp("hostile") / "proj")
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text()
        + '\n[[notify]]\nname = "hook"\nkind = "http"\nurl = "http://127.0.0.1:9/never"\n'
        + '\n[[consumers]]\nname = "finance"\nmodel = "daily_revenue"\nnotify = "hook"\n'
    )
    done = tidegate("backfill", MODEL, "--partitions", PUBLISHED, "--project", project)
    assert done.exit_code == 0, done.stderr
    return project


@pytest.fixture(scope="module")
def shared(template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy for the refusals, which must leave it as it is."""
    project = tmp_path_factory.mktemp("shared") / "proj"
    shutil.copytree(template, project)
    return project


@pytest.fixture(scope="module")
def baseline(shared: Path) -> Dumps:
    return state_dump(shared), warehouse_dump(shared)


@pytest.fixture
def fresh(template: Path, tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    shutil.copytree(template, project)
    return project


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
    ("backfill", MODEL, "--partitions", "2025-01-03"),
    ("report", "--out", "report.html"),
    ("history", MODEL),
]


@pytest.mark.parametrize("as_of", AS_OF)
def test_an_as_of_past_the_calendar_is_refused(shared: Path, baseline: Dumps, as_of: str) -> None:
    for args in AS_OF_COMMANDS:
        line = refused(shared, (*args, "--as-of", as_of), baseline)
        assert "--as-of" in line and SPAN in line, line
    assert not (shared / "report.html").exists()
