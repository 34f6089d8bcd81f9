"""A model's Airflow asset: `Asset("tidegate://PROJECT/MODEL")`. A DAG scheduled on it runs for
the partitions a task published (its asset events carry them as partition keys)."""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import Asset

from tidegate.airflow.naming import asset_uri, project_name


def model_asset(model: str, project: Path | str) -> Asset:
    """The asset of `model` of the project in folder `project` (its tidegate.toml names it)."""
    uri = asset_uri(project_name(Path(project)), model)
    return Asset(uri=uri, name=uri)
