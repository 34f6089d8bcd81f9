"""A Spark warehouse as `[warehouse]` describes it: where Spark runs, where the tables' folder
is and where the leases' fences are."""

from __future__ import annotations

from pathlib import Path

from tidegate.domain.errors import UsageError
from tidegate.engines.spark_fences import RETIRED_HINT, FencesPlace, fences_place
from tidegate.engines.spark_layout import FENCES_FILE, RETIRED_CATALOG_FILE, Layout
from tidegate.engines.spark_session import SessionSettings
from tidegate.project.config import SQLITE_CATALOG, WarehouseSection

SPARK_SQL_WAREHOUSE = "spark.sql.warehouse.dir"
SPARK_SQL_DIRECTORY = "_tidegate/spark-sql"
# the location Spark's retired format defaulted to
RETIRED_DEFAULT_LOCATION = "warehouse"


def spark_warehouse(
    root: Path, settings: WarehouseSection
) -> tuple[SessionSettings, Layout, FencesPlace]:
    """The session, layout and fences of a project's Spark warehouse (`root`: the project,
    which a relative location is relative to). UsageError when the warehouse is in the
    retired format."""
    layout = Layout(location_of(root, settings.iceberg_location))
    local = layout.local
    if local is None:  # the configuration refuses it; for the type checker
        raise UsageError("a Spark warehouse's location is a folder")
    refuse_retired(root, settings, local)
    # Spark SQL's own warehouse directory (unused: tables are addressed by path) goes under the
    # location, not into the directory tidegate was started from
    own = {} if settings.remote else {SPARK_SQL_WAREHOUSE: layout.path(SPARK_SQL_DIRECTORY)}
    session = SessionSettings(
        master=None if settings.remote is not None else settings.master,
        remote=settings.remote,
        conf={**own, **{k: _text(v) for k, v in settings.conf.items()}},
    )
    dsn = None if settings.catalog in (None, SQLITE_CATALOG) else settings.catalog
    fences = fences_place(layout.root, local / FENCES_FILE, dsn, settings.password_env)
    return session, layout, fences


def refuse_retired(root: Path, settings: WarehouseSection, local: Path) -> None:
    """UsageError when the location (or, none given, the retired default one) holds the
    catalog file of Spark's retired format."""
    folders = [local]
    if "location" not in settings.model_fields_set:
        folders.append(root / RETIRED_DEFAULT_LOCATION)
    for folder in folders:
        retired = folder / RETIRED_CATALOG_FILE
        if retired.exists():
            raise UsageError(
                f"{retired} holds the pointers of Spark's former tables, which tidegate no "
                f"longer publishes: {RETIRED_HINT}"
            )


def location_of(root: Path, location: str) -> str:
    """A location as Spark reads it: a file URI as it is, a local path made absolute."""
    if Layout(location).local is None or location.startswith("file://"):
        return location
    return str((root / location).resolve())


def _text(value: str | int | float | bool) -> str:
    # Spark's settings are text; TOML's true is Spark's "true"
    return str(value).lower() if isinstance(value, bool) else str(value)
