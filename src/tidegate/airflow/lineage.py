"""The OpenLineage parent of a tidegate command: the Airflow task that started it, when Airflow's
OpenLineage provider is installed (its macros name the task's run); nothing otherwise."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

PARENT = "OPENLINEAGE_PARENT_ID"  # namespace/job_name/run_id
ROOT_PARENT = "OPENLINEAGE_ROOT_PARENT_ID"


def parent_environment(task_instance: Any) -> dict[str, str]:
    """The environment variables that name the task as the command's OpenLineage parent."""
    try:
        from airflow.providers.openlineage.plugins import macros
    except ImportError:
        return {}
    found: dict[str, str] = {}
    for variable, macro in ((PARENT, "lineage_parent_id"), (ROOT_PARENT, "lineage_root_parent_id")):
        function = getattr(macros, macro, None)
        if function is None:
            continue
        try:
            value = function(task_instance)
        except Exception as error:  # the provider's macros fail on a task they cannot name
            log.warning("OpenLineage %s unavailable: %s", macro, error)
            continue
        if isinstance(value, str) and value:
            found[variable] = value
    return found
