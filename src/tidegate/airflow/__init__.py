"""The Airflow 3 provider (`pip install 'tidegate[airflow]'`): an operator that runs one tidegate
command per task, a trigger that follows a detached backfill, a timetable helper and the asset a
model's partitions are published on. A thin wrapper: every judgment stays in the command.

Airflow is imported only where it is used: `naming`, `outcomes` and `keys` import none of it, and
the names below are loaded on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidegate.airflow.assets import model_asset
    from tidegate.airflow.operator import TidegateOperator
    from tidegate.airflow.timetable import partition_timetable
    from tidegate.airflow.trigger import TidegateRunTrigger

__all__ = ["TidegateOperator", "TidegateRunTrigger", "model_asset", "partition_timetable"]

_HOMES = {
    "TidegateOperator": "tidegate.airflow.operator",
    "TidegateRunTrigger": "tidegate.airflow.trigger",
    "model_asset": "tidegate.airflow.assets",
    "partition_timetable": "tidegate.airflow.timetable",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)
