"""The name of a model's asset: `tidegate://PROJECT/MODEL`, PROJECT the `[project] name` of the
project's tidegate.toml (read with tomllib: nothing of tidegate's core is loaded)."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SCHEME = "tidegate"
# Airflow's limit on an asset event's partition key
PARTITION_KEY_MAX_LENGTH = 250


def project_name(project: Path) -> str:
    """The `[project] name` of the project in folder `project`."""
    config = project / "tidegate.toml"
    try:
        with config.open("rb") as file:
            document = tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"cannot read {config}: {error}") from None
    section = document.get("project")
    name = section.get("name") if isinstance(section, dict) else None
    if not isinstance(name, str) or not name:
        raise ValueError(f"{config} names no project (`[project] name`)")
    return name


def asset_uri(project: str, model: str) -> str:
    """`tidegate://PROJECT/MODEL`."""
    for part, value in (("project", project), ("model", model)):
        if not value or "/" in value:
            raise ValueError(f"a {part} name must be non-empty and hold no `/`: {value!r}")
    return f"{SCHEME}://{project}/{model}"


def partition_key(partition: str) -> str:
    """A published partition's label as an asset event's partition key (the label itself)."""
    if not partition.strip() or len(partition) > PARTITION_KEY_MAX_LENGTH:
        raise ValueError(
            f"a partition key must be 1 to {PARTITION_KEY_MAX_LENGTH} characters: {partition!r}"
        )
    return partition
