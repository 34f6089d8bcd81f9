"""Dataset names in OpenLineage events follow OpenLineage's naming conventions, whatever the
warehouse: the same table gets the name other tools give it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.iceberg.kit import NAMESPACE, iceberg_project, outside_catalog
from tests.kit import tidegate
from tidegate.domain.model import Source, SourceFiles
from tidegate.notify.lineage_names import DatasetName, Naming
from tidegate.project.config import WarehouseSection

ROOT = Path("/srv/project")


def naming(**warehouse: object) -> Naming:
    return Naming(ROOT, WarehouseSection.model_validate(warehouse))


def test_a_duckdb_table_is_named_by_its_file_and_catalog() -> None:
    assert naming().model("daily_revenue") == DatasetName(
        "duckdb:///srv/project/warehouse.duckdb", "warehouse.main.daily_revenue"
    )
    assert naming(path="/data/w.db").table("orders").name == "w.main.orders"


@pytest.mark.parametrize(
    ("dsn", "namespace", "database"),
    [
        ("postgresql://etl@db.internal:6432/analytics", "postgres://db.internal:6432", "analytics"),
        ("postgresql://etl@db.internal/analytics", "postgres://db.internal:5432", "analytics"),
        ("postgresql://etl@/test?host=/var/run/postgresql", "postgres://localhost:5432", "test"),
        ("postgres://etl@db.internal:6432", "postgres://db.internal:6432", "etl"),
    ],
)
def test_a_postgres_table_is_named_by_host_port_database_and_schema(
    dsn: str, namespace: str, database: str
) -> None:
    named = naming(engine="postgres", dsn=dsn, schema="marts").model("daily_revenue")
    assert named == DatasetName(namespace, f"{database}.marts.daily_revenue")


def test_an_iceberg_table_is_named_by_its_folder_with_the_catalog_as_symlink() -> None:
    named = naming(tables="iceberg", namespace="analytics").model("daily_revenue")
    assert named == DatasetName(
        "file",
        "/srv/project/lake/analytics/daily_revenue",
        ("sqlite:///srv/project/lake/catalog.db", "analytics.daily_revenue"),
        "iceberg",
    )
    shared = naming(engine="spark", location="/lake", catalog="postgresql://etl@h:1/c")
    assert shared.model("daily_revenue") == DatasetName(
        "file",
        "/lake/default/daily_revenue",
        ("postgres://h:1/c", "default.daily_revenue"),
        "iceberg",
    )


def test_a_file_source_is_named_by_its_path() -> None:
    files = Source("orders", "orders", "ts", files=SourceFiles("/data/orders/*.parquet", "parquet"))
    assert naming().source(files) == DatasetName("file", "/data/orders/*.parquet")
    table = Source("orders", "raw_orders", "ts")
    assert naming().source(table).name == "warehouse.main.raw_orders"


@pytest.mark.duckdb
def test_the_name_of_an_iceberg_table_is_where_the_catalog_put_it(tmp_path: Path) -> None:
    project = iceberg_project(tmp_path / "p")
    done = tidegate("run", "daily_revenue", "--partition", "2025-01-01", "--project", project)
    assert done.exit_code == 0, done.stderr
    warehouse = WarehouseSection.model_validate({"tables": "iceberg", "namespace": NAMESPACE})
    named = Naming(project, warehouse).model("daily_revenue")
    with outside_catalog(project) as catalog:
        location = catalog.load_table((NAMESPACE, "daily_revenue")).location()
    assert f"file://{named.name}" == location or named.name == location
