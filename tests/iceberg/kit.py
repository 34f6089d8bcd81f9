"""Iceberg warehouses for tests: a DuckDB engine publishing into Iceberg tables of a SQLite or a
PostgreSQL catalog in a folder of the test's own."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.engines.postgres_kit import SERVER
from tests.kit import build_and_deploy, example_project
from tidegate.engines.duckdb_iceberg import DuckDBIcebergEngine
from tidegate.engines.iceberg_place import CATALOG_FILE, catalog_uri
from tidegate.engines.iceberg_tables import IcebergTables, Place


def sqlite_place(folder: Path, namespace: str = "default") -> Place:
    lake = folder / "lake"
    lake = lake.resolve()
    return Place(catalog_uri(lake, None, None), lake.as_uri(), namespace, lake / CATALOG_FILE)


def postgres_place(folder: Path) -> Place:
    """A catalog in the test PostgreSQL database; a namespace of its own keeps tests apart."""
    lake = folder / "lake"
    lake.mkdir(parents=True, exist_ok=True)
    namespace = f"t_{uuid.uuid4().hex[:12]}"
    return Place(catalog_uri(lake, SERVER, None), lake.resolve().as_uri(), namespace)


def iceberg_engine(folder: Path, place: Place | None = None) -> DuckDBIcebergEngine:
    place = place or sqlite_place(folder)
    return DuckDBIcebergEngine(folder / "warehouse.duckdb", IcebergTables(place))


def drop_namespace(place: Place) -> None:
    """Remove a test's tables and namespace from the shared PostgreSQL catalog."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import NoSuchNamespaceError

    catalog = SqlCatalog("cleanup", uri=place.catalog_uri, warehouse=place.location)
    try:
        nested = [n for n in catalog.list_namespaces(place.namespace) if n != (place.namespace,)]
        for namespace in [*nested, (place.namespace,)]:
            for identifier in catalog.list_tables(namespace):
                catalog.drop_table(identifier)
            catalog.drop_namespace(namespace)
    except NoSuchNamespaceError:
        pass  # nothing was published
    finally:
        catalog.engine.dispose()


NAMESPACE = "analytics"


def iceberg_project(target: Path, rows_per_day: int = 20, deploy: bool = True) -> Path:
    """The reference orders project publishing into Iceberg tables (`tables = "iceberg"`,
    namespace `analytics`, the SQLite catalog in `lake/catalog.db`), built and deployed."""
    example_project(target, rows_per_day, deploy=False)
    config = target / "tidegate.toml"
    text = config.read_text()
    warehouse = '[warehouse]\nengine = "duckdb"\npath = "warehouse.duckdb"\n'
    assert warehouse in text
    config.write_text(
        text.replace(warehouse, warehouse + f'tables = "iceberg"\nnamespace = "{NAMESPACE}"\n')
    )
    if deploy:
        build_and_deploy(target)
    return target


@contextlib.contextmanager
def outside_catalog(project: Path, folder: str = "lake") -> Iterator[Any]:
    """The project's catalog opened by pyiceberg alone, as any other Iceberg reader would."""
    from pyiceberg.catalog.sql import SqlCatalog

    lake = (project / folder).resolve()
    catalog = SqlCatalog(
        "tidegate", uri=f"sqlite:///{lake / 'catalog.db'}", warehouse=lake.as_uri()
    )
    try:
        yield catalog
    finally:
        catalog.engine.dispose()
