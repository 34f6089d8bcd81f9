"""Dagster integration: one asset per tidegate model (`tidegate_assets`). Install it with
`pip install 'tidegate[dagster]'`.

Only `tidegate.dagster.assets` imports Dagster, and only when `tidegate_assets` is called: the
mapping of grains, requests and results (`partitioning`, `requests`, `results`) is plain Python,
usable and tested without Dagster. The wrappers stay thin: every judgment (what to run, whether
it may, whether it passed) is tidegate's, made by the command each materialization runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidegate.dagster.assets import tidegate_assets

__all__ = ["tidegate_assets"]


def __getattr__(name: str) -> Any:
    """`tidegate_assets`, loaded (with Dagster) on first use."""
    if name != "tidegate_assets":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from tidegate.dagster.assets import tidegate_assets

    return tidegate_assets
