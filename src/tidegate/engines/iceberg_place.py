"""Where a project's Iceberg tables are: the catalog's database and the tables' folder."""

from __future__ import annotations

import os
from pathlib import Path

from tidegate.domain.errors import UsageError
from tidegate.engines.iceberg_tables import Place
from tidegate.project.config import SQLITE_CATALOG, WarehouseSection

# the default catalog, a SQLite file in the tables' folder: the folder holds all an outside
# reader needs
CATALOG_FILE = "catalog.db"


def iceberg_place(root: Path, settings: WarehouseSection) -> Place:
    """The catalog URI (SQLAlchemy's, the password set from `password_env`, never written
    anywhere), the folder as an absolute file URI, and the namespace."""
    location = settings.iceberg_location
    folder = Path(location[len("file://") :] if location.startswith("file://") else location)
    folder = (root / folder).resolve()
    sqlite = settings.catalog in (None, SQLITE_CATALOG)
    return Place(
        catalog_uri=catalog_uri(folder, settings.catalog, settings.password_env),
        location=folder.as_uri(),
        namespace=settings.namespace,
        catalog_file=folder / CATALOG_FILE if sqlite else None,
    )


def catalog_uri(folder: Path, catalog: str | None, password_env: str | None) -> str:
    if catalog in (None, SQLITE_CATALOG):
        return f"sqlite:///{folder / CATALOG_FILE}"
    from sqlalchemy.engine import make_url

    url = make_url(str(catalog)).set(drivername="postgresql+psycopg")
    if password_env is not None:
        password = os.environ.get(password_env)
        if password is None:
            raise UsageError(f"the environment variable {password_env} (password_env) is not set")
        url = url.set(password=password)
    return url.render_as_string(hide_password=False)
