"""Dagster integration: one asset per tidegate model (`tidegate_assets`). Install it with
`pip install 'tidegate[dagster]'`.

Only `tidegate.dagster.assets` imports Dagster, and only when `tidegate_assets` is called: the
mapping of grains, requests and results (`partitioning`, `requests`, `results`) is plain Python,
usable and tested without Dagster. The wrappers stay thin: every judgment (what to run, whether
it may, whether it passed) is tidegate's, made by the command each materialization runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dagster import AssetsDefinition

__all__ = ["tidegate_assets"]


def tidegate_assets(
    project: Path | str,
    *,
    models: Iterable[str] | None = None,
    key_prefix: Sequence[str] = (),
    group_name: str | None = None,
    program: Sequence[str] | None = None,
    options: Sequence[str] = (),
    retry_policy: Any = None,
) -> list[AssetsDefinition]:
    """One Dagster asset per model of the tidegate project at `project` (see
    `tidegate.dagster.assets.tidegate_assets`)."""
    from tidegate.dagster.assets import tidegate_assets as build

    return build(
        project,
        models=models,
        key_prefix=key_prefix,
        group_name=group_name,
        program=program,
        options=options,
        retry_policy=retry_policy,
    )
