"""dbt models: tidegate's own dbt runs a dbt project's model for a batch of partitions into
Parquet, which is audited and published like any model's output."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import example_project
from tests.programs.kit import add_dbt_model, daily_oracle, deploy, document, published, run
from tidegate.execution.dbt import VENV_VARIABLE

pytestmark = pytest.mark.slow


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # one dbt for the whole suite, installed by the first test that needs it (under a lock)
    shared = Path(os.environ.get("TMPDIR", "/tmp")) / "tidegate-test-dbt-venv"
    monkeypatch.setenv(VENV_VARIABLE, str(shared))
    project = example_project(tmp_path / "shop", rows_per_day=3)
    add_dbt_model(project, "revenue_dbt")
    deploy(project, "revenue_dbt")
    yield project


def test_a_dbt_model_equals_the_sql_one_for_a_month_one_run_per_batch(project: Path) -> None:
    month = ("--partitions", "2025-02-01..2025-02-28", "--batch-size", "14")
    done = document(project, "backfill", "revenue_dbt", *month)
    assert done["status"] == "succeeded" and done["published"] == 28
    sql = document(project, "backfill", "daily_revenue", *month)
    assert sql["status"] == "succeeded"
    dbt_rows = published(project, "revenue_dbt")
    assert dbt_rows == published(project, "daily_revenue")
    assert dbt_rows == daily_oracle(project, "2025-02-01", "2025-02-28")
    assert len({row[0] for row in dbt_rows}) == 28
    shown = document(project, "show", "run", done["run_id"])
    jobs = {a["command"]["started_at"] for a in shown["attempts"]}
    assert len(jobs) == 2  # fourteen days per dbt invocation
    command = shown["attempts"][0]["command"]
    assert command["exit_code"] == 0
    assert command["command"][1:2] == ["run"] and "revenue" not in command["command"][0]
    assert '"start": "2025-02-01T00:00:00+00:00"' in command["command"][-1]


def test_a_failing_dbt_model_publishes_nothing_and_a_change_is_a_new_version(
    project: Path,
) -> None:
    run(project, "run", "revenue_dbt", "--partition", "2025-02-01")
    before = published(project, "revenue_dbt")
    model = project / "dbt" / "models" / "daily_revenue.sql"
    model.write_text(model.read_text().replace("count(*)", "count(no_such_column)"))
    built = document(project, "build")
    [entry] = [m for m in built["models"] if m["model"] == "revenue_dbt"]
    assert entry["change"] == "modified"
    run(project, "deploy", "revenue_dbt", "--force", "--reason", "the failure is under test")
    failed = document(project, "run", "revenue_dbt", "--partition", "2025-02-01", code=1)
    assert "command exited with code 1" in failed["partitions"][0]["reason"]
    assert published(project, "revenue_dbt") == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('dbt_project = "dbt"', 'dbt_project = "nowhere"'), "5: dbt_project: 'nowhere' is not"),
        (('dbt_model = "daily_revenue"', 'dbt_model = "nope"'), "6: dbt_model: the dbt project"),
        (('dbt_model = "daily_revenue"', ""), "1: dbt_model: required key is missing"),
    ],
)
def test_a_bad_dbt_model_is_one_line_exit_2(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    project = example_project(tmp_path / "shop", rows_per_day=1, deploy=False)
    path = add_dbt_model(project, "revenue_dbt")
    path.write_text(path.read_text().replace(*change))
    result = run(project, "build", code=2)
    assert result.stderr.startswith(f"error: models/revenue_dbt.toml:{message}"), result.stderr
