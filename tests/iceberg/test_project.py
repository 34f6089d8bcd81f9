"""A project publishing into Iceberg tables, as a user runs it: the reference year backfilled,
read by name from outside with pyiceberg alone and equal to an independent GROUP BY and to the
same backfill into DuckDB tables; `show partition` names the snapshot; a bad rerun undone by
`restore`; a table changed behind tidegate's back seen by `verify`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.faults.ledger import published_checksums
from tests.iceberg.kit import NAMESPACE, iceberg_project, outside_catalog
from tests.kit import cli, example_project, result_document, tidegate, warehouse_execute

YEAR = "2025-01-01..2025-12-31"
COLUMNS = ("order_date", "status", "order_count", "gross_revenue", "net_revenue")

# the reader an outside user writes: pyiceberg and the catalog's address, nothing of tidegate
READER = """
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
lake = sys.argv[1]
catalog = SqlCatalog("tidegate", uri=f"sqlite:///{lake}/catalog.db", warehouse=f"file://{lake}")
table = catalog.load_table("analytics.daily_revenue")
rows = table.scan().to_arrow().to_pylist()
assert not any(name.startswith("tidegate") for name in sys.modules), "tidegate was imported"
print(json.dumps(sorted(
    [str(r["order_date"]), r["status"], str(r["order_count"]), str(r["gross_revenue"]),
     str(r["net_revenue"])] for r in rows
)))
"""

ORACLE = """
SELECT CAST(order_ts AS DATE) AS order_date, status, count(*),
       CAST(sum(gross_amount) AS DECIMAL(18, 2)),
       CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2))
FROM orders WHERE order_ts >= '2025-01-01' AND order_ts < '2026-01-01'
GROUP BY 1, 2
"""


def texts(rows: list[tuple[Any, ...]]) -> list[list[str]]:
    return sorted([str(v) for v in row] for row in rows)


def read_outside(project: Path) -> list[list[str]]:
    """The published table read by a separate Python process with pyiceberg alone."""
    done = subprocess.run(
        [sys.executable, "-c", READER, str((project / "lake").resolve())],
        capture_output=True,
        text=True,
        check=False,
        cwd=project,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    found: list[list[str]] = json.loads(done.stdout)
    return found


def duckdb_rows(project: Path, query: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(project / "warehouse.duckdb"), read_only=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def year(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The reference project on Iceberg with the year of daily_revenue backfilled."""
    project = iceberg_project(tmp_path_factory.mktemp("iceberg") / "p", rows_per_day=8)
    cli(project, "backfill", "daily_revenue", "--partitions", YEAR, "--batch-size", "30")
    yield project


def test_the_year_reads_by_name_from_outside_and_equals_a_group_by(year: Path) -> None:
    outside = read_outside(year)
    assert len(outside) > 365
    assert outside == texts(duckdb_rows(year, ORACLE))
    assert cli(year, "verify", "--checksums", "daily_revenue").stdout.count("clean") == 1


def test_the_year_equals_the_same_backfill_into_duckdb_tables(year: Path, tmp_path: Path) -> None:
    plain = example_project(tmp_path / "plain", rows_per_day=8)
    cli(plain, "backfill", "daily_revenue", "--partitions", YEAR, "--batch-size", "30")
    query = "SELECT " + ", ".join(COLUMNS) + " FROM daily_revenue"
    assert read_outside(year) == texts(duckdb_rows(plain, query))
    # the ledger's per-partition checksums are the same, value for value
    assert published_checksums(year, "daily_revenue") == published_checksums(plain, "daily_revenue")


def assert_shows_its_snapshot(project: Path, day: str) -> dict[str, Any]:
    """`show partition` names the snapshot of main that holds the day: one whose properties
    name the partition's published attempt, read from outside. Returns what it named."""
    document = result_document(project, "show", "partition", "daily_revenue", day)
    held: dict[str, Any] = document["published"]["iceberg"]
    assert held["table"] == f"{NAMESPACE}.daily_revenue"
    with outside_catalog(project) as catalog:
        snapshot = catalog.load_table((NAMESPACE, "daily_revenue")).snapshot_by_id(
            held["snapshot_id"]
        )
    assert snapshot is not None
    attempts = snapshot.summary.additional_properties["tidegate.attempts"].split(",")
    assert document["published"]["attempt_id"] in attempts
    return held


def test_show_partition_names_the_snapshot_that_holds_it(year: Path) -> None:
    held = assert_shows_its_snapshot(year, "2025-03-03")
    text = cli(year, "show", "partition", "daily_revenue", "2025-03-03").stdout
    assert f"snapshot {held['snapshot_id']}" in text


def test_restore_undoes_a_bad_rerun_without_recomputing(tmp_path: Path) -> None:
    project = iceberg_project(tmp_path / "p", rows_per_day=30)
    days = "2025-01-01..2025-01-04"
    first = result_document(project, "backfill", "daily_revenue", "--partitions", days)
    good = read_outside(project)
    good_checksums = {
        day: result_document(project, "show", "partition", "daily_revenue", day)["published"][
            "checksum"
        ]
        for day in ("2025-01-02", "2025-01-03")
    }
    # a load doubled the orders of those days; a rerun publishes the doubled sums, and every
    # check and reconciliation passes (they agree with the source)
    warehouse_execute(
        project,
        "INSERT INTO orders SELECT order_id + 1000000, order_ts, customer_id, status, "
        "gross_amount, discount, refund FROM orders "
        "WHERE order_ts >= '2025-01-01' AND order_ts < '2025-01-05'",
    )
    cli(project, "rerun", "daily_revenue", "--partitions", days)
    doubled = read_outside(project)
    assert doubled != good

    # the data comes back from the files the first run wrote, without reading the source
    restored = result_document(
        project, "restore", "daily_revenue", "--partitions", "2025-01-02..2025-01-03",
        "--to", first["run_id"],
    )  # fmt: skip
    assert restored["status"] == "succeeded"
    assert [p["deterministic"] for p in restored["proofs"]] == [True, True]
    assert {p["partition"]: p["after"] for p in restored["proofs"]} == good_checksums
    assert [r["run_id"] for r in restored["restored"]] == [first["run_id"]] * 2
    # restored days hold the first run's rows again; the two days left alone keep the rerun's
    now = read_outside(project)
    back = {"2025-01-02", "2025-01-03"}
    assert [r for r in now if r[0] in back] == [r for r in good if r[0] in back]
    assert [r for r in now if r[0] not in back] == [r for r in doubled if r[0] not in back]
    run = result_document(project, "show", "run", restored["run_id"])
    assert run["kind"] == "restore"
    assert "clean" in cli(project, "verify", "--checksums", "daily_revenue").stdout
    # what it records: the earlier attempt's inputs, the version's checks run again
    shown = result_document(project, "show", "partition", "daily_revenue", "2025-01-02")
    earlier = result_document(project, "show", "partition", "daily_revenue", "2025-01-01")
    assert shown["published"]["run_id"] == restored["run_id"]
    assert shown["published"]["checks"] and all(c["passed"] for c in shown["published"]["checks"])
    assert [i["fingerprint"] for i in shown["published"]["inputs"]] != [
        i["fingerprint"] for i in earlier["published"]["inputs"]
    ]


def test_restore_with_another_version_needs_approval(tmp_path: Path) -> None:
    project = iceberg_project(tmp_path / "p")
    first = result_document(project, "run", "daily_revenue", "--partition", "2025-01-02")
    model = project / "models" / "daily_revenue.sql"
    text = model.read_text()
    assert "CAST(sum(gross_amount) AS" in text
    model.write_text(text.replace("CAST(sum(gross_amount) AS", "CAST(sum(gross_amount) + 0 AS"))
    cli(project, "build")
    cli(project, "deploy", "daily_revenue", "--force", "--reason", "a comment")
    cli(project, "rerun", "daily_revenue", "--partitions", "2025-01-02", "--approve", "v2")
    refused = tidegate(
        "restore", "daily_revenue", "--partitions", "2025-01-02", "--to", first["run_id"],
        "--project", project,
    )  # fmt: skip
    assert refused.exit_code == 3, refused.stderr
    assert "approv" in refused.stderr and refused.stderr.strip().count("\n") == 0
    restored = result_document(
        project, "restore", "daily_revenue", "--partitions", "2025-01-02",
        "--to", first["run_id"], "--approve", "back to v1's rows",
    )  # fmt: skip
    assert restored["approval"]["reason"] == "back to v1's rows"
    # written by v1 while v2 is active: shown stale, never as current
    shown = result_document(project, "show", "partition", "daily_revenue", "2025-01-02")
    assert shown["state"] == "stale"


def test_restore_refusals_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    plain = example_project(tmp_path / "plain")
    cli(plain, "run", "daily_revenue", "--partition", "2025-01-01")
    refused = tidegate(
        "restore", "daily_revenue", "--partitions", "2025-01-01", "--to", "run-x",
        "--project", plain,
    )  # fmt: skip
    assert refused.exit_code == 2
    assert refused.stderr.strip().count("\n") == 0
    assert 'tables = "iceberg"' in refused.stderr

    project = iceberg_project(tmp_path / "p")
    ran = result_document(project, "run", "daily_revenue", "--partition", "2025-01-01")
    for to, words in (
        ("run-20250101T000000000000Z-abcdef", "no run"),
        ("att-nope", "no attempt"),
        ("banana", "--to takes a run"),
        (ran["run_id"], "published no daily_revenue 2025-01-02"),
    ):
        result = tidegate(
            "restore", "daily_revenue", "--partitions", "2025-01-02", "--to", to,
            "--project", project,
        )  # fmt: skip
        assert result.exit_code == 2, (to, result.stderr)
        assert words in result.stderr and result.stderr.strip().count("\n") == 0
    runs = result_document(project, "status")["models"][0]["last_run"]["run_id"]
    assert runs == ran["run_id"]


def test_a_table_changed_behind_tidegates_back_is_found_by_verify(tmp_path: Path) -> None:
    project = iceberg_project(tmp_path / "p")
    cli(project, "backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-03")
    with outside_catalog(project) as catalog:
        table = catalog.load_table((NAMESPACE, "daily_revenue"))
        table.delete("status = 'completed'")
    found = tidegate("verify", "--checksums", "daily_revenue", "--project", project)
    assert found.exit_code == 1
    assert "checksum differs" in found.stdout and "2025-01-01..2025-01-03" in found.stdout
    # the next writer makes its copy again from main's files, whatever it then does (this
    # run fails: monthly_revenue, its upstream, was never published)
    cli(project, "run", "revenue_report", "--partition", "2025-01", code=1)
    rows = duckdb_rows(project, "SELECT count(*) FROM daily_revenue WHERE status = 'completed'")
    assert rows == [(0,)]


def test_an_added_column_is_an_iceberg_added_column(tmp_path: Path) -> None:
    project = iceberg_project(tmp_path / "p")
    cli(project, "backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-02")
    model = project / "models" / "daily_revenue.sql"
    text = model.read_text()
    model.write_text(
        text.replace(
            'net_revenue = "DECIMAL(18, 2) NOT NULL"',
            'net_revenue = "DECIMAL(18, 2) NOT NULL"\navg_gross = "DECIMAL(18, 2)"',
        ).replace(
            "    CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue\n",
            "    CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue,\n"
            "    CAST(avg(gross_amount) AS DECIMAL(18, 2)) AS avg_gross\n",
        )
    )
    assert "avg_gross" in model.read_text()
    cli(project, "build")
    cli(project, "deploy", "daily_revenue", "--force", "--reason", "a new column")
    cli(project, "rerun", "daily_revenue", "--partitions", "2025-01-02", "--approve", "v2")
    with outside_catalog(project) as catalog:
        table = catalog.load_table((NAMESPACE, "daily_revenue"))
        assert table.schema().column_names[-1] == "avg_gross"
        assert not table.schema().find_field("avg_gross").required
        rows = table.scan(selected_fields=("order_date", "avg_gross")).to_arrow().to_pylist()
    by_day: dict[str, set[bool]] = {}
    for row in rows:
        by_day.setdefault(str(row["order_date"]), set()).add(row["avg_gross"] is None)
    # the day written before the column reads it as NULL, without a rewrite; the rerun day has it
    assert by_day == {"2025-01-01": {True}, "2025-01-02": {False}}
    assert "clean" in cli(project, "verify", "--checksums", "daily_revenue").stdout


def test_a_missing_catalog_is_refused_not_made_anew(tmp_path: Path) -> None:
    project = iceberg_project(tmp_path / "p")
    cli(project, "run", "daily_revenue", "--partition", "2025-01-01")
    (project / "lake").rename(project / "elsewhere")
    refused = tidegate("run", "daily_revenue", "--partition", "2025-01-02", "--project", project)
    assert refused.exit_code == 2
    assert "Iceberg catalog" in refused.stderr and "is missing" in refused.stderr
    assert refused.stderr.strip().count("\n") == 0
    assert not (project / "lake").exists()


def test_a_damaged_table_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    project = iceberg_project(tmp_path / "p")
    cli(project, "run", "daily_revenue", "--partition", "2025-01-01")
    metadata = sorted((project / "lake" / NAMESPACE / "daily_revenue" / "metadata").glob("*.json"))
    metadata[-1].unlink()
    found = tidegate("verify", "--project", project)
    assert found.exit_code == 1
    assert found.stderr.startswith("error: iceberg: cannot read table analytics.daily_revenue")
    assert "internal error" not in found.stderr and found.stderr.strip().count("\n") == 0


def test_a_republished_day_is_one_overwrite_snapshot_of_its_files(tmp_path: Path) -> None:
    """A rerun's publish replaces the day's files by its own in one snapshot of main (an
    overwrite: the old file deleted, the new one added), the other days' files untouched."""
    project = iceberg_project(tmp_path / "p", rows_per_day=8)
    cli(project, "backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-03")
    with outside_catalog(project) as catalog:
        table = catalog.load_table((NAMESPACE, "daily_revenue"))
        before = table.current_snapshot()
        files_before = {t.file.file_path for t in table.scan().plan_files()}
    cli(project, "rerun", "daily_revenue", "--partitions", "2025-01-02")
    with outside_catalog(project) as catalog:
        table = catalog.load_table((NAMESPACE, "daily_revenue"))
        after = table.current_snapshot()
        files_after = {t.file.file_path for t in table.scan().plan_files()}
        day2 = {
            t.file.file_path
            for t in table.scan(row_filter="order_date = '2025-01-02'").plan_files()
        }
    assert before is not None and after is not None
    assert after.parent_snapshot_id == before.snapshot_id
    assert after.summary is not None and after.summary.operation.value == "overwrite"
    assert after.summary["deleted-data-files"] == "1"
    assert after.summary["added-data-files"] == "1"
    replaced = files_before - files_after
    assert len(day2) == 1 and len(replaced) == 1 and not day2 & files_before
    assert files_after == (files_before - replaced) | day2
