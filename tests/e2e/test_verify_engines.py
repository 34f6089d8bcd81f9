"""`tidegate verify` beyond the embedded default: a PostgreSQL warehouse with its ledger in
PostgreSQL too, and a Spark warehouse (markers in its Iceberg tables' snapshots). The same
findings, the same repair, the same refusal of a lost ledger and its rebuild as on DuckDB
(tests/ops/test_verify.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.engines.postgres_kit import fresh_database, postgres_project
from tests.engines.spark_kit import LOCATION, spark_project
from tests.iceberg.kit import outside_catalog
from tests.kit import tidegate
from tests.state.postgres_kit import admin

WEEK = "2025-01-01..2025-01-07"
LOST = "the ledger is empty but the warehouse holds 7 commit markers of project orders"


def verify(project: Path, *args: str, code: int = 0) -> dict[str, Any]:
    result = tidegate("verify", *args, "--project", project, "--json")
    assert result.exit_code == code, (args, result.stdout[-1500:], result.stderr)
    document: dict[str, Any] = result.json()
    return document


def backfill(project: Path, *flags: str) -> None:
    result = tidegate(
        "backfill", "daily_revenue", "--partitions", WEEK, "--batch-size", "7", *flags,
        "--project", project,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr


def published(project: Path) -> int:
    status = tidegate("status", "--project", project, "--json")
    assert status.exit_code == 0, status.stderr
    return int(status.json()["models"][0]["partitions"]["published"])


@pytest.mark.postgres
def test_verify_on_a_postgres_warehouse_and_ledger(tmp_path: Path) -> None:
    with fresh_database() as dsn:
        project = postgres_project(tmp_path / "pg", dsn, rows_per_day=4, deploy=False)
        config = project / "tidegate.toml"
        state = '[state]\npath = ".tidegate/state.db"\n'
        config.write_text(
            config.read_text().replace(state, f'[state]\nurl = "{dsn}"\nschema = "ledger"\n')
        )
        assert tidegate("build", "--project", project).exit_code == 0
        assert tidegate("deploy", "daily_revenue", "--project", project).exit_code == 0
        backfill(project)
        assert verify(project, "--checksums")["clean"]

        with admin(dsn) as con:
            con.execute(
                "UPDATE daily_revenue SET net_revenue = net_revenue - 1 "
                "WHERE order_date = DATE '2025-01-02'"
            )
        found = verify(project, "--checksums", code=1)["findings"]
        assert [(f["partition"], f["kind"]) for f in found] == [("2025-01-02", "checksum differs")]
        with admin(dsn) as con:
            con.execute("DROP TABLE daily_revenue")
        found = verify(project, code=1)["findings"]
        assert {f["kind"] for f in found} == {"missing table"} and len(found) == 7
        repaired = verify(project, "--repair", code=1)["repaired"]
        assert [(r["kind"], r["marked"]) for r in repaired] == [("missing", 7)]
        backfill(project, "--stale-only")
        assert verify(project, "--checksums")["clean"]

        with admin(dsn) as con:
            con.execute("DROP SCHEMA ledger CASCADE")
        refused = tidegate("status", "--project", project)
        assert refused.exit_code == 2 and LOST.replace("7", "14") in refused.stderr
        rebuilt = verify(project, "--rebuild-ledger")["rebuilt"]
        assert (rebuilt["markers"], rebuilt["runs"]) == (14, 2)
        assert published(project) == 7
        assert verify(project, "--checksums")["clean"]


@pytest.mark.spark
@pytest.mark.xdist_group("spark")
def test_verify_on_a_spark_warehouse(tmp_path: Path) -> None:
    project = spark_project(tmp_path / "spark", rows_per_day=4)
    backfill(project)
    assert verify(project, "daily_revenue", "--checksums")["clean"]

    # another tool rolls the table back to before the backfill: main's history no longer
    # holds the publish, nor its markers
    with outside_catalog(project, LOCATION) as catalog:
        table = catalog.load_table(("default", "daily_revenue"))
        first = min(table.snapshots(), key=lambda snapshot: snapshot.sequence_number)
        table.manage_snapshots().set_current_snapshot(snapshot_id=first.snapshot_id).commit()
    found = verify(project, "daily_revenue", code=1)["findings"]
    assert {f["kind"] for f in found} == {"missing marker"}
    assert sorted(f["partition"] for f in found) == [f"2025-01-0{d}" for d in range(1, 8)]
    verify(project, "daily_revenue", "--repair", code=1)
    backfill(project, "--stale-only")
    assert verify(project, "daily_revenue")["clean"]

    (project / ".tidegate" / "state.db").write_bytes(b"")
    refused = tidegate("status", "--project", project)
    # the markers of the backfill that published the week again
    assert refused.exit_code == 2 and LOST in refused.stderr
    assert verify(project, "--rebuild-ledger")["rebuilt"]["markers"] == 7
    assert published(project) == 7
