"""G1 for a merge: killed after its publish committed and before the ledger heard of it, the
next writer records the partition from the commit marker — the content the merge left (rows
kept from before included), not the rows the attempt staged."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.faults.ledger import assert_ledger_matches_markers, live_attempts
from tests.kit import run_process, warehouse_execute
from tests.ops.test_write_modes import (
    DAY,
    MODEL,
    ledger_day,
    model_file,
    published_rows,
    recomputed,
    run_day,
    source_rows,
    with_model,
)
from tidegate.crash import ENVIRONMENT_VARIABLE


@pytest.mark.crash
def test_a_merge_killed_after_its_publish_is_recorded_with_the_partition_content(
    project: Path,
) -> None:
    with_model(project, model_file("merge"))
    run_day(project)
    kept = source_rows(project)[0][0]
    # not staged again: the merge keeps its row, so the partition holds one row more than staged
    warehouse_execute(project, f"DELETE FROM orders WHERE order_id = {kept}")

    crashed = run_process(
        "run",
        MODEL,
        "--partition",
        DAY,
        "--project",
        project,
        env={ENVIRONMENT_VARIABLE: "after_publish"},
        timeout=60,
    )
    assert crashed.exit_code == -signal.SIGKILL, (crashed.exit_code, crashed.stderr)
    [(pending, _, state)] = live_attempts(project)
    assert state == "audited"

    resumed = run_process("run", MODEL, "--partition", "2025-01-03", "--project", project, "--json")
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.json()["recovered"]["published"] == [pending]
    assert kept in {r[0] for r in published_rows(project)}
    assert ledger_day(project) == (20, recomputed(project))
    assert_ledger_matches_markers(project, MODEL)
    assert live_attempts(project) == []
