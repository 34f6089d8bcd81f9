"""The names of tidegate's datasets in OpenLineage events, after OpenLineage's dataset naming
conventions, so that they join the lineage other tools report of the same tables:

- a DuckDB table: `duckdb://<absolute path of the file>`, `<catalog>.<schema>.<table>` (DuckDB's
  catalog is the file's stem), as OpenLineage's dbt integration names them;
- a PostgreSQL table: `postgres://<host>:<port>`, `<database>.<schema>.<table>`;
- an Iceberg table: where its files are, as OpenLineage's Spark integration names a table of a
  catalog (`file` and the table's folder), with the catalog's name of it as a symlink;
- files read by a source: `file` and their absolute path (or glob).

Pure: from the project's settings, no connection opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tidegate.domain.model import Source
from tidegate.project.config import SQLITE_CATALOG, WarehouseSection

POSTGRES_PORT = 5432
DUCKDB_SCHEMA = "main"


@dataclass(frozen=True)
class DatasetName:
    """A dataset's OpenLineage namespace and name, and what else names it."""

    namespace: str
    name: str
    # (namespace, name) of the same table in its catalog (Iceberg tables)
    symlink: tuple[str, str] | None = None
    # "iceberg" for Iceberg tables (their storage facet), else None
    storage: str | None = None


class Naming:
    """Names the tables of one project's warehouse."""

    def __init__(self, root: Path, warehouse: WarehouseSection) -> None:
        self.root = root
        self.warehouse = warehouse

    @property
    def iceberg_tables(self) -> bool:
        return self.warehouse.engine == "spark" or self.warehouse.tables == "iceberg"

    def model(self, name: str) -> DatasetName:
        """A model's published table."""
        if self.iceberg_tables:
            return self.iceberg(f"{self.warehouse.namespace}.{name}")
        return self.table(name)

    def source(self, source: Source) -> DatasetName:
        """What a source reads: its files, its Iceberg table or its warehouse table."""
        if source.files is not None:
            return DatasetName("file", source.files.path)
        if source.iceberg is not None:
            return self.iceberg(source.iceberg)
        if self.warehouse.engine == "spark":
            return self.iceberg(f"{self.warehouse.namespace}.{source.table}")
        return self.table(source.table)

    def table(self, table: str) -> DatasetName:
        """A table of the engine's own (DuckDB's or PostgreSQL's)."""
        if self.warehouse.engine == "postgres":
            host, port, database = _postgres_place(self.warehouse.dsn or "")
            return DatasetName(
                f"postgres://{host}:{port}", f"{database}.{self.warehouse.db_schema}.{table}"
            )
        path = (self.root / self.warehouse.path).resolve()
        return DatasetName(f"duckdb://{path}", f"{path.stem}.{DUCKDB_SCHEMA}.{table}")

    def iceberg(self, identifier: str) -> DatasetName:
        """An Iceberg table of the catalog (`NAMESPACE.TABLE`): its folder in the warehouse
        location (the catalog's default layout, `<location>/<namespace>/<table>`)."""
        namespace, _, table = identifier.rpartition(".")
        return DatasetName(
            "file",
            f"{self._location()}/{namespace}/{table}",
            (self._catalog(), identifier),
            "iceberg",
        )

    def _location(self) -> str:
        """The tables' folder (the configuration allows a local one only), absolute."""
        local = Path(self.warehouse.iceberg_location.removeprefix("file://"))
        return str((self.root / local).resolve())

    def _catalog(self) -> str:
        """The catalog's namespace: the SQLite file, or PostgreSQL's `postgres://host:port/db`
        (never its user or password)."""
        catalog = self.warehouse.catalog
        if catalog in (None, SQLITE_CATALOG):
            return f"sqlite://{self._location()}/catalog.db"
        host, port, database = _postgres_place(str(catalog))
        return f"postgres://{host}:{port}/{database}"


def _postgres_place(dsn: str) -> tuple[str, int, str]:
    """(host, port, database) of a PostgreSQL URI (the configuration holds no other kind); a
    socket is `localhost`."""
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(dsn)
    host = str(params.get("host") or "localhost").split(",")[0]
    if host.startswith("/"):
        host = "localhost"
    port = str(params.get("port") or POSTGRES_PORT).split(",")[0]
    database = str(params.get("dbname") or params.get("user") or "postgres")
    return host, int(port) if port.isdigit() else POSTGRES_PORT, database
