"""A whole-table publish killed just before or just after its transaction: the next run of
`all` settles the killed attempt from the commit marker (or its absence) and leaves the table,
the ledger and the markers as a clean run does."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.faults.ledger import assert_ledger_matches_markers, live_attempts
from tests.kit import example_project, run_process, warehouse_execute, warehouse_rows
from tests.ops.test_whole_table import ORACLE, PUBLISHED, cli, write_summary
from tidegate.crash import ENVIRONMENT_VARIABLE

MODEL = "customers_summary"


@pytest.mark.crash
@pytest.mark.parametrize(
    ("point", "committed"), [("before_publish", False), ("after_publish", True)]
)
def test_a_killed_whole_table_publish_resumes_to_a_clean_run(
    tmp_path: Path, point: str, committed: bool
) -> None:
    project = example_project(tmp_path / "p")
    write_summary(project)
    cli(project, "build")
    cli(project, "deploy", MODEL)
    cli(project, "run", MODEL, "--partition", "all")
    warehouse_execute(project, "DELETE FROM orders WHERE status = 'refunded'")

    crashed = run_process(
        "run", MODEL, "--partition", "all", "--project", project, env={ENVIRONMENT_VARIABLE: point}
    )
    assert crashed.exit_code == -signal.SIGKILL, (crashed.exit_code, crashed.stderr)
    [(pending, _, _)] = live_attempts(project)
    # before its commit the table is the old one; after it, the new one
    changed = warehouse_rows(project, PUBLISHED) == warehouse_rows(project, ORACLE)
    assert changed is committed

    resumed = run_process("run", MODEL, "--partition", "all", "--project", project, "--json")
    assert resumed.exit_code == 0, resumed.stderr
    assert (pending in resumed.json()["recovered"]["published"]) is committed
    assert warehouse_rows(project, PUBLISHED) == warehouse_rows(project, ORACLE)
    assert assert_ledger_matches_markers(project, MODEL) == 1
    assert live_attempts(project) == []
