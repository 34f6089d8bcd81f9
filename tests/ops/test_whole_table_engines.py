"""A whole-table model end to end on the server and lake warehouses: PostgreSQL replaces its
rows in one transaction, Spark moves its Iceberg table's main; both record, verify and lend it to a
daily model like a partition."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.engines.postgres_kit import fresh_database, postgres_project, rows
from tests.engines.spark_kit import LOCATION, published_rows, spark_project
from tests.ops.test_whole_table import SHARE, cli, doc, published_inputs, write_summary

MODEL = "customers_summary"
Read = Callable[[], list[tuple[Any, ...]]]


@pytest.fixture(
    params=[
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("spark", marks=[pytest.mark.spark, pytest.mark.xdist_group("spark")]),
    ]
)
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Read]]:
    """The orders example on the engine, the whole-table model deployed, and a reader of its
    published rows (status, order_count)."""
    if request.param == "postgres":
        with fresh_database("whole") as dsn:
            folder = postgres_project(tmp_path / "proj", dsn)
            query = f"SELECT status, order_count FROM {MODEL} ORDER BY status"
            yield deployed(folder), lambda: rows(dsn, query)
        return
    folder = spark_project(tmp_path / "proj")
    yield (
        deployed(folder),
        lambda: published_rows(folder / LOCATION, MODEL, "status, order_count"),
    )


def deployed(folder: Path) -> Path:
    write_summary(folder)
    (folder / "models" / "status_share.sql").write_text(SHARE)
    cli(folder, "build")
    cli(folder, "deploy", MODEL)
    cli(folder, "deploy", "status_share")
    return folder


def test_the_whole_table_is_published_verified_and_read_whole(
    project: tuple[Path, Read],
) -> None:
    folder, read = project
    cli(folder, "run", MODEL, "--partition", "all")
    first = read()
    assert [status for status, _ in first] == ["cancelled", "completed", "refunded", "shipped"]
    assert sum(count for _, count in first) == 365 * 20
    rerun = doc(folder, "rerun", MODEL, "--partitions", "all")
    assert [p["deterministic"] for p in rerun["proofs"]] == [True]
    assert read() == first
    checked = doc(folder, "verify", "--checksums")
    assert checked["clean"] is True
    [summary] = [m for m in checked["models"] if m["model"] == MODEL]
    assert summary["checksums"]["compared"] == 1
    cli(folder, "run", "status_share", "--partition", "2025-03-01")
    [read_all] = [
        i for i in published_inputs(folder, "status_share", "2025-03-01") if i["upstream"] == MODEL
    ]
    assert read_all["range"] == "all"
