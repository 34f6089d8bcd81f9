"""A project's `[dbt]` section, loaded: compiled by dbt (cached), read, and turned into
tidegate models and sources."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from tidegate.dbt.columns import Describer
from tidegate.dbt.compiler import ARTIFACTS, compiled
from tidegate.dbt.manifest import read_manifest
from tidegate.dbt.models import DbtProject, Warehouse, dbt_project
from tidegate.domain.errors import ConfigError
from tidegate.domain.model import Source
from tidegate.engines.base import Engine
from tidegate.project.config import ProjectFile
from tidegate.project.layout import PROJECT_FILE

# the dbt adapter that builds into each warehouse engine tidegate controls dbt projects on
ADAPTERS = {"duckdb": "duckdb", "postgres": "postgres"}


def load_dbt(
    root: Path,
    settings: ProjectFile,
    sources: dict[str, Source],
    redact: Callable[[str], str],
    reserved: Callable[[str], bool],
    open_engine: Callable[[Mapping[str, Source]], Engine],
) -> DbtProject | None:
    """The dbt project's models and sources (None without a `[dbt]` section). `sources`:
    tidegate.toml's own; `open_engine` opens the warehouse read-only with the given sources."""
    section = settings.dbt
    if section is None:
        return None
    engine = settings.warehouse.engine
    if engine not in ADAPTERS:
        raise ConfigError(
            PROJECT_FILE,
            "dbt: tidegate controls dbt projects on the duckdb and postgres warehouses, "
            f"not {engine}",
        )
    built = compiled(root, section, redact)
    manifest = read_manifest(built.manifest)
    if manifest.adapter_type != ADAPTERS[engine]:
        raise ConfigError(
            PROJECT_FILE,
            f"dbt: the target compiles for {manifest.adapter_type}, the warehouse is {engine}: "
            "choose a target of the warehouse's (dbt.target)",
        )
    describer = Describer(open_engine, root / ARTIFACTS / "columns.json")
    try:
        project = dbt_project(
            manifest,
            section.project,
            built.adapter_version,
            _warehouse(settings),
            set(sources),
            describer,
            reserved,
        )
    finally:
        describer.close()
    return project


def _warehouse(settings: ProjectFile) -> Warehouse:
    warehouse = settings.warehouse
    if warehouse.engine == "postgres" and warehouse.dsn is not None:
        parts = urlsplit(warehouse.dsn)
        return Warehouse(parts.path.lstrip("/") or (parts.username or ""), warehouse.db_schema)
    return Warehouse(Path(warehouse.path).stem, "main")
