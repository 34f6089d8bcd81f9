"""Whole-table models (grain "table"): one partition, `all`, published, audited, rerun,
validated, compared and scheduled like any other, and read whole by the models downstream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.kit import (
    cli,
    example_project,
    result_document,
    state_dump,
    tidegate,
    warehouse_execute,
    warehouse_rows,
)
from tests.ops.test_json_schemas import nested, schema_name, validator

SUMMARY = """/* tidegate
grain = "table"
schedule = "0 2 * * *"

[columns]
status = "VARCHAR NOT NULL"
order_count = "BIGINT NOT NULL"
gross = "DECIMAL(18, 2) NOT NULL"

[[checks]]
type = "unique"
columns = ["status"]

[[checks]]
name = "few_statuses"
type = "row_count"
max = {max_rows}

[[reconciliations]]
name = "row_count"
source = "orders"
source_expression = "count(*)"
target_expression = "sum(order_count)"
*/
SELECT status, count(*) AS order_count, CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross
FROM orders
GROUP BY status
"""

# a daily model that reads the whole-table one whole
SHARE = """/* tidegate
grain = "day"
time_column = "order_date"
start = "2025-01-01"

[columns]
order_date = "DATE NOT NULL"
status = "VARCHAR NOT NULL"
orders = "BIGINT NOT NULL"
all_orders = "BIGINT NOT NULL"
*/
SELECT CAST(o.order_ts AS DATE) AS order_date, o.status, count(*) AS orders,
       max(s.order_count) AS all_orders
FROM orders AS o JOIN customers_summary AS s ON s.status = o.status
WHERE o.order_ts >= $start AND o.order_ts < $end
GROUP BY CAST(o.order_ts AS DATE), o.status
"""

ORACLE = (
    "SELECT status, count(*), CAST(sum(gross_amount) AS DECIMAL(18, 2)) FROM orders "
    "GROUP BY status ORDER BY status"
)
MODEL = "customers_summary"
PUBLISHED = "SELECT status, order_count, gross FROM customers_summary ORDER BY status"


def doc(project: Path, *args: str, code: int = 0) -> dict[str, Any]:
    document = result_document(project, *args, code=code)
    # a whole table's documents hold its grain and its partition's label: the schemas take them
    for found in nested(document):
        validator(schema_name(found)).validate(found)
    return document


def write_summary(project: Path, max_rows: int = 10) -> None:
    (project / "models" / "customers_summary.sql").write_text(SUMMARY.format(max_rows=max_rows))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The orders project with the whole-table model built, deployed and published once."""
    folder = example_project(tmp_path / "p")
    write_summary(folder)
    cli(folder, "build")
    cli(folder, "deploy", "customers_summary")
    cli(folder, "run", "customers_summary", "--partition", "all")
    return folder


def published(project: Path) -> dict[str, Any]:
    found: dict[str, Any] = doc(project, "show", "partition", "customers_summary", "all")
    return found


def test_the_one_partition_is_published_with_its_marker(project: Path) -> None:
    assert warehouse_rows(project, PUBLISHED) == warehouse_rows(project, ORACLE)
    part = published(project)
    assert part["state"] == "published"
    assert part["published"]["rows"] == 4
    assert [(r["name"], r["passed"]) for r in part["published"]["reconciliations"]] == [
        ("row_count", True)
    ]
    [marker] = warehouse_rows(
        project,
        "SELECT partition_start, partition_end, checksum FROM _tidegate.commit_markers "
        "WHERE model = 'customers_summary'",
    )
    assert marker == (0, 1, part["published"]["checksum"])
    status = doc(project, "status", "customers_summary")["models"][0]
    assert status["grain"] == "table"
    assert status["next_partition"]["partition"] == "all"
    assert status["next_partition"]["unpublished"] == []
    checked = doc(project, "verify", "--checksums")
    assert checked["clean"] is True
    assert any(m["checksums"]["compared"] == 1 for m in checked["models"])


def test_a_rerun_after_the_source_changed_replaces_the_rows(project: Path) -> None:
    before = published(project)["published"]["checksum"]
    warehouse_execute(project, "DELETE FROM orders WHERE status = 'refunded'")
    rerun = doc(project, "rerun", "customers_summary", "--partitions", "all")
    assert [j["verdict"] for j in rerun["judgment"]] == ["safe"]
    [proof] = rerun["proofs"]
    assert proof["before"] == before and proof["after"] != before
    assert proof["same_inputs"] is False
    assert warehouse_rows(project, PUBLISHED) == warehouse_rows(project, ORACLE)
    assert [r[0] for r in warehouse_rows(project, PUBLISHED)] == [
        "cancelled",
        "completed",
        "shipped",
    ]
    backfill = doc(project, "backfill", "customers_summary", "--partitions", "all")
    assert backfill["status"] == "succeeded"
    assert doc(project, "verify", "--checksums")["clean"] is True


def test_a_failing_blocking_check_leaves_the_published_rows(project: Path) -> None:
    rows = warehouse_rows(project, PUBLISHED)
    write_summary(project, max_rows=2)
    cli(project, "build")
    cli(project, "deploy", "customers_summary", "--force", "--reason", "the audit is under test")
    cli(project, "run", "customers_summary", "--partition", "all", code=1)
    assert warehouse_rows(project, PUBLISHED) == rows
    gate = doc(project, "validate", "customers_summary", code=1)
    assert gate["passed"] is False


def test_an_empty_source_skips_it_and_keeps_the_published_rows(project: Path) -> None:
    rows = warehouse_rows(project, PUBLISHED)
    warehouse_execute(project, "DELETE FROM orders")
    ran = doc(project, "run", "customers_summary", "--partition", "all", code=1)
    [part] = ran["partitions"]
    assert part["state"] == "skipped"
    assert part["reason"] == "source orders has 0 row(s) (at least 1 expected)"
    assert warehouse_rows(project, PUBLISHED) == rows


def test_validate_and_diff_compare_the_whole_table(project: Path) -> None:
    summary = project / "models" / "customers_summary.sql"
    summary.write_text(summary.read_text().replace("FROM orders\n", "FROM orders\nWHERE true\n"))
    cli(project, "build")
    gate = doc(project, "validate", "customers_summary")
    assert gate["passed"] is True
    assert [p["partition"] for p in gate["partitions"]] == ["all"]
    compared = doc(project, "diff", "customers_summary", "--left", "v1", "--right", "v2")
    assert compared["agree"] is True
    assert compared["summary"]["compared"] == 1


def test_a_daily_model_reads_it_whole_and_goes_stale_when_it_changes(project: Path) -> None:
    (project / "models" / "status_share.sql").write_text(SHARE)
    cli(project, "build")
    cli(project, "deploy", "status_share")
    cli(project, "run", "status_share", "--partition", "2025-03-01")
    summary = published(project)["published"]["attempt_id"]
    [read] = [
        i
        for i in published_inputs(project, "status_share", "2025-03-01")
        if i["upstream"] == "customers_summary"
    ]
    assert read["range"] == "all"
    assert read["attempts"] == [summary]
    # read downstream: the judgment asks for approval, naming the reader
    judged = doc(project, "rerun", "customers_summary", "--partitions", "all", "--dry-run")
    [judgment] = judged["judgment"]
    assert judgment["verdict"] == "needs approval"
    assert "status_share 2025-03-01" in judgment["reason"]
    approve = ("--approve", "the summary is recomputed")
    # republished with the same content: nothing downstream to recompute
    cli(project, "rerun", "customers_summary", "--partitions", "all", *approve)
    assert taints(project, "status_share", "2025-03-01") == []
    warehouse_execute(project, "DELETE FROM orders WHERE status = 'refunded'")
    cli(project, "rerun", "customers_summary", "--partitions", "all", *approve)
    assert [t["kind"] for t in taints(project, "status_share", "2025-03-01")] == ["stale"]
    cli(project, "backfill", "status_share", "--partitions", "2025-03-01", "--stale-only")
    assert taints(project, "status_share", "2025-03-01") == []


def published_inputs(project: Path, model: str, partition: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = doc(project, "show", "partition", model, partition)["published"][
        "inputs"
    ]
    return found


def taints(project: Path, model: str, partition: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = doc(project, "show", "partition", model, partition)["taints"]
    return found


def test_the_schedule_republishes_it_at_each_tick_after_its_last_publish(tmp_path: Path) -> None:
    folder = example_project(tmp_path / "p")
    write_summary(folder)
    cli(folder, "build")
    cli(folder, "deploy", "customers_summary")
    first = "2026-03-01T03:00:00"
    ticked = doc(folder, "run", "customers_summary", "--as-of", first)
    assert [p["partition"] for p in ticked["partitions"]] == ["all"]
    # the same night: published after the schedule's last fire, nothing is due
    again = doc(folder, "run", "customers_summary", "--as-of", "2026-03-01T05:00:00")
    assert again["partitions"] == []
    upcoming = doc(folder, "status", "customers_summary", "--as-of", "2026-03-01T05:00:00")
    assert upcoming["models"][0]["next_partition"]["due_at"] == "2026-03-02T02:00:00+00:00"
    nightly = doc(folder, "run", "customers_summary", "--as-of", "2026-03-02T02:30:00")
    assert [p["partition"] for p in nightly["partitions"]] == ["all"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda text: text.replace(
                "GROUP BY status", "WHERE order_ts >= $start GROUP BY status"
            ),
            "$start is an unavailable parameter here (a whole-table model reads its inputs whole)",
        ),
        (
            lambda text: text.replace('grain = "table"', 'grain = "table"\ntime_column = "status"'),
            'time_column: a whole-table model (grain = "table") has no partitions to declare',
        ),
        (
            lambda text: text.replace(
                "[[reconciliations]]",
                '[[checks]]\ntype = "freshness"\ncolumn = "status"\nmax_age = "1d"\n\n'
                "[[reconciliations]]",
            ),
            "freshness needs a time grain: a table partition has no end to be fresh at",
        ),
    ],
)
def test_bad_headers_are_refused_in_one_line(tmp_path: Path, change: Any, message: str) -> None:
    folder = example_project(tmp_path / "p")
    summary = folder / "models" / "customers_summary.sql"
    summary.write_text(change(SUMMARY.format(max_rows=10)))
    before = state_dump(folder)
    result = tidegate("build", "--project", folder)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert state_dump(folder) == before


def test_a_backfill_of_all_is_one_batch(project: Path) -> None:
    args = ("backfill", MODEL, "--partitions", "all", "--batch-size", "5", "--project", project)
    result = tidegate(*args)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: a whole-table model's one partition is a batch of its own: use --batch-size 1"
    )


def test_a_partition_other_than_all_is_refused(project: Path) -> None:
    result = tidegate("run", "customers_summary", "--partition", "2025-01-01", "--project", project)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: partition '2025-01-01' is not a partition of a whole-table model: its one "
        "partition is 'all'"
    )


def test_a_python_model_cannot_be_a_whole_table_yet(tmp_path: Path) -> None:
    folder = example_project(tmp_path / "p")
    (folder / "models" / "py_whole.py").write_text(
        "import pyarrow as pa\n\nimport tidegate\n\n\n"
        '@tidegate.model(grain="table", sources=["orders"], columns={"n": "BIGINT"})\n'
        "def py_whole(ctx):\n"
        '    return pa.table({"n": [1]})\n'
    )
    result = tidegate("build", "--project", folder)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: models/py_whole.py:6: grain: a whole-table model is an SQL model for now "
        '(grain = "table" in a .sql file)'
    )


def test_taint_and_recover_address_all(project: Path) -> None:
    cli(project, "taint", MODEL, "--partitions", "all", "--reason", "a bad load upstream")
    assert [t["kind"] for t in taints(project, MODEL, "all")] == ["taint"]
    recovered = doc(project, "recover", MODEL, "--partitions", "all")
    assert recovered["status"] == "succeeded"
    assert taints(project, MODEL, "all") == []
    assert warehouse_rows(project, PUBLISHED) == warehouse_rows(project, ORACLE)


def test_a_whole_table_over_a_daily_model_reads_what_it_published(project: Path) -> None:
    (project / "models" / "totals.sql").write_text(
        '/* tidegate\ngrain = "table"\n\n[columns]\nstatus = "VARCHAR NOT NULL"\n'
        'orders = "BIGINT NOT NULL"\n*/\n'
        "SELECT status, CAST(sum(order_count) AS BIGINT) AS orders FROM daily_revenue "
        "GROUP BY status\n"
    )
    cli(project, "build")
    cli(project, "deploy", "totals")
    cli(project, "backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-03")
    cli(project, "run", "totals", "--partition", "all")
    [read] = published_inputs(project, "totals", "all")
    assert (read["upstream"], read["range"]) == ("daily_revenue", "2025-01-01..2025-01-03")
    warehouse_execute(
        project,
        "DELETE FROM orders WHERE order_ts >= TIMESTAMP '2025-01-02' "
        "AND order_ts < TIMESTAMP '2025-01-03' AND status = 'completed'",
    )
    cli(project, "rerun", "daily_revenue", "--partitions", "2025-01-02", "--approve", "late rows")
    assert [t["kind"] for t in taints(project, "totals", "all")] == ["stale"]
    cli(project, "recover", "totals", "--partitions", "all")
    assert taints(project, "totals", "all") == []
