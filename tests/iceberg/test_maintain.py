"""`tidegate maintain`: the Iceberg tables' superseded snapshots expired and their files removed,
each partition's current snapshot kept (verify and restore of the current attempts work), the
leftover branches removed; --dry-run lists the same and removes nothing.

Snapshots are made old without waiting: `--as-of` moves "now" past `[warehouse] keep`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.iceberg.kit import NAMESPACE, iceberg_project, outside_catalog
from tests.kit import cli, example_project, result_document, tidegate, warehouse_rows
from tests.ops.test_json_schemas import validator

MODEL = "daily_revenue"
LATER = "2099-01-01T00:00:00Z"  # decades past keep = "30d": every snapshot is old
COLUMNS = ("order_date", "status", "order_count", "gross_revenue", "net_revenue")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four days backfilled in two batches, each batch published again by a rerun: the backfill's
    snapshots are superseded, the reruns' hold every partition's current marker."""
    project = iceberg_project(tmp_path_factory.mktemp("maintain") / "orders", rows_per_day=5)
    first = result_document(
        project, "backfill", MODEL, "--partitions", "2025-01-01..2025-01-04", "--batch-size", "2"
    )
    assert first["status"] == "succeeded"
    (project / "first_run").write_text(first["run_id"])
    reruns = []
    for days in ("2025-01-01..2025-01-02", "2025-01-03..2025-01-04"):
        done = result_document(project, "rerun", MODEL, "--partitions", days)
        assert done["status"] == "succeeded"
        reruns.append(done["run_id"])
    (project / "reruns").write_text("\n".join(reruns))
    return project


def files_of(project: Path) -> set[str]:
    folder = project / "lake" / NAMESPACE / MODEL
    return {str(Path(d, n).relative_to(folder)) for d, _, names in os.walk(folder) for n in names}


@contextlib.contextmanager
def outside(project: Path) -> Iterator[Any]:
    """The model's table as pyiceberg alone reads it."""
    with outside_catalog(project) as catalog:
        yield catalog.load_table((NAMESPACE, MODEL))


def main_rows(project: Path) -> list[tuple[Any, ...]]:
    with outside(project) as table:
        rows = table.scan(selected_fields=COLUMNS).to_arrow().to_pylist()
    return sorted(tuple(row[c] for c in COLUMNS) for row in rows)


def leave_a_branch(project: Path) -> None:
    """A branch a killed publish left, with a snapshot of its own whose file no main snapshot
    references."""
    with outside(project) as table:
        main = table.current_snapshot()
        assert main is not None
        table.manage_snapshots().create_branch(main.snapshot_id, "tidegate-att-killed").commit()
        rows = table.scan(selected_fields=tuple(c.name for c in table.schema().fields))
        table.append(rows.to_arrow().slice(0, 1), branch="tidegate-att-killed")


def test_maintain_expires_superseded_snapshots_and_their_files_only(project: Path) -> None:
    leave_a_branch(project)
    before_files = files_of(project)
    before_rows = main_rows(project)

    # nothing is older than keep now: nothing goes but the branch
    young = result_document(project, "maintain", "--dry-run")
    assert young["removed"] == {"branches": 1, "snapshots": 0, "files": 0, "bytes": 0}

    planned = result_document(project, "maintain", "--dry-run", "--as-of", LATER)
    assert list(validator("maintain").iter_errors(planned)) == []
    assert files_of(project) == before_files  # a dry run removes nothing
    with outside(project) as table:
        assert "tidegate-att-killed" in table.refs()

    done = result_document(project, "maintain", "--as-of", LATER)
    assert list(validator("maintain").iter_errors(done)) == []
    assert done["dry_run"] is False and planned["dry_run"] is True
    assert done["tables"] == planned["tables"] and done["removed"] == planned["removed"]

    (table_done,) = done["tables"]
    assert table_done["branches"] == ["tidegate-att-killed"]
    removed = {f["path"] for f in table_done["files"]}
    assert removed and removed <= before_files
    after_files = files_of(project)
    assert after_files & removed == set()
    # what is left, and the metadata files of maintain's two commits (branch, expiry)
    written = after_files - (before_files - removed)
    assert len(written) == 2 and all(p.endswith(".metadata.json") for p in written), written
    data = {p for p in removed if p.startswith("data/")}
    # the backfill's files of the two days the first rerun replaced, and the branch's file
    assert len(data) >= 2
    assert table_done["bytes"] == sum(f["bytes"] for f in table_done["files"])
    expired = {a for s in table_done["snapshots"] for a in s["attempts"]}
    first_run = (project / "first_run").read_text()
    assert expired  # the backfill's first batch: published again by the first rerun

    # what readers read is unchanged; the ledger and the warehouse agree, checksums included
    assert main_rows(project) == before_rows
    with outside(project) as table:
        assert [r for r in table.refs() if r != "main"] == []
        snapshots = {s.snapshot_id for s in table.metadata.snapshots}
        assert not snapshots & {s["snapshot_id"] for s in table_done["snapshots"]}
        # main did not move: the DuckDB copy stands for the new metadata file, not made again
        mirrored = warehouse_rows(
            project,
            "SELECT metadata_location FROM _tidegate.iceberg_mirrors WHERE table_name = ?",
            [MODEL],
        )
        assert mirrored == [(table.metadata_location,)]
    cli(project, "verify", "--checksums")

    # again: nothing left to remove
    again = result_document(project, "maintain", "--as-of", LATER)
    assert again["removed"] == {"branches": 0, "snapshots": 0, "files": 0, "bytes": 0}

    # the current attempts restore from their kept snapshots; an expired one does not
    second_rerun = (project / "reruns").read_text().split()[1]
    restored = result_document(
        project, "restore", MODEL, "--partitions", "2025-01-03..2025-01-04", "--to", second_rerun
    )
    assert restored["status"] == "succeeded"
    assert list(validator("restore").iter_errors(restored)) == []
    cli(project, "verify", "--checksums")
    assert main_rows(project) == before_rows
    gone = cli(
        project,
        "restore",
        MODEL,
        "--partitions",
        "2025-01-01..2025-01-01",
        "--to",
        first_run,
        code=2,
    )
    assert gone.stderr.count("\n") == 1, gone.stderr
    assert "holds no snapshot of attempt" in gone.stderr and "tidegate maintain" in gone.stderr
    assert main_rows(project) == before_rows


def test_model_without_a_table_unknown_model_and_other_warehouses(project: Path) -> None:
    for args, says in (
        (("maintain", "monthly_revenue"), "monthly_revenue has no Iceberg table"),
        (("maintain", "nope"), "unknown model 'nope'"),
    ):
        result = tidegate(*args, "--project", project)
        assert result.exit_code == 2, result.stderr
        assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr


def test_keep_is_a_duration_of_iceberg_tables(tmp_path: Path) -> None:
    plain = example_project(tmp_path / "plain", 5, deploy=False)
    result = tidegate("maintain", "--project", plain)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "maintains Iceberg tables" in result.stderr

    config = plain / "tidegate.toml"
    text = config.read_text()
    config.write_text(
        text.replace('path = "warehouse.duckdb"\n', 'path = "warehouse.duckdb"\nkeep = "7d"\n')
    )
    result = tidegate("maintain", "--project", plain)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and 'keep is for tables = "iceberg"' in result.stderr

    lake = iceberg_project(tmp_path / "lake", 5, deploy=False)
    config = lake / "tidegate.toml"
    config.write_text(
        config.read_text().replace('tables = "iceberg"\n', 'tables = "iceberg"\nkeep = "soon"\n')
    )
    result = tidegate("maintain", "--project", lake)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "'soon' is not a duration" in result.stderr
