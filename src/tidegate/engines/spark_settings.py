"""A Spark warehouse as `[warehouse]` describes it: where Spark runs, where the files are and
where the catalog is."""

from __future__ import annotations

from pathlib import Path

from tidegate.engines.spark_catalog import CatalogPlace, catalog_place
from tidegate.engines.spark_layout import Layout
from tidegate.engines.spark_session import SessionSettings
from tidegate.project.config import SQLITE_CATALOG, WarehouseSection

SPARK_SQL_WAREHOUSE = "spark.sql.warehouse.dir"
SPARK_SQL_DIRECTORY = "_tidegate/spark-sql"
# Iceberg tables: the leases' fences, beside the Iceberg catalog's SQLite file (a catalog in
# PostgreSQL keeps them in its database)
FENCES_FILE = "_tidegate/fences.sqlite"


def spark_warehouse(
    root: Path, settings: WarehouseSection
) -> tuple[SessionSettings, Layout, CatalogPlace]:
    """The session, layout and catalog of a project's Spark warehouse (`root`: the project,
    which a relative location is relative to)."""
    iceberg = settings.tables == "iceberg"
    layout = Layout(location_of(root, settings.iceberg_location if iceberg else settings.location))
    # Spark SQL's own warehouse directory (unused: tables are addressed by path) goes under the
    # location, not into the directory tidegate was started from
    own = {} if settings.remote else {SPARK_SQL_WAREHOUSE: layout.path(SPARK_SQL_DIRECTORY)}
    session = SessionSettings(
        master=None if settings.remote is not None else settings.master,
        remote=settings.remote,
        conf={**own, **{k: _text(v) for k, v in settings.conf.items()}},
    )
    if iceberg:
        local = layout.local
        dsn = None if settings.catalog in (None, SQLITE_CATALOG) else settings.catalog
        fences = None if local is None else local / FENCES_FILE
        catalog = catalog_place(layout.root, fences, dsn, settings.password_env)
    else:
        catalog = catalog_place(
            layout.root, layout.catalog_file(), settings.catalog, settings.password_env
        )
    return session, layout, catalog


def location_of(root: Path, location: str) -> str:
    """A location as Spark reads it: a URI as it is, a local path made absolute."""
    if Layout(location).local is None or location.startswith("file://"):
        return location
    return str((root / location).resolve())


def _text(value: str | int | float | bool) -> str:
    # Spark's settings are text; TOML's true is Spark's "true"
    return str(value).lower() if isinstance(value, bool) else str(value)
