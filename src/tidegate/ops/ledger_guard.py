"""A lost ledger is refused: an empty ledger beside a warehouse that holds commit markers.

Without this, `status` would answer "nothing published" and the next run would write markers
beside those of runs nobody remembers. The warehouse is probed only while the ledger has never
recorded a version or a run — a project before its first `build`, or a ledger lost (a file
truncated or deleted, an empty PostgreSQL schema) — so `status`, `show` and `history` of a
project in use never open the warehouse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tidegate.domain.errors import BusyError, UsageError
from tidegate.project.view import ProjectView

if TYPE_CHECKING:
    from tidegate.project.loader import Project
    from tidegate.state.base import StateStore


def never_used(view: ProjectView, state: StateStore) -> bool:
    """Whether the ledger has recorded nothing: no run and no version of any model."""
    return not state.runs(limit=1) and not any(state.versions(m) for m in view.order)


def warehouse_markers(project: Project) -> int | None:
    """How many commit markers of the project's models the warehouse holds; None when it cannot
    tell. A writer holding the DuckDB file passed this check when it started, so the ledger it
    writes is not lost; a warehouse out of reach (a server down, its driver not installed on a
    machine that only reads the ledger) is not a reason to refuse the ledger's own commands —
    a writer cannot run without it anyway."""
    from tidegate.engines.factory import open_markers

    try:
        reader = open_markers(project)
    except (BusyError, UsageError, ImportError):
        return None
    if reader is None:
        return 0
    try:
        return sum(len(reader.markers_of(model)) for model in project.order)
    finally:
        reader.close()


def lost_ledger_message(project: Project, markers: int) -> str:
    return (
        f"the ledger is empty but the warehouse holds {markers} commit markers of project "
        f"{project.settings.project.name}; restore the ledger, or rebuild it from the markers "
        "with `tidegate verify --rebuild-ledger`"
    )


def refuse_lost_ledger(
    view: ProjectView, state: StateStore, project: Callable[[], Project]
) -> None:
    """Raise UsageError (exit 2) when the ledger has recorded nothing but the warehouse holds
    markers of the project's models. Loads the project and reads the warehouse only when the
    ledger is empty."""
    if not never_used(view, state):
        return
    loaded = project()
    markers = warehouse_markers(loaded)
    if markers:
        raise UsageError(lost_ledger_message(loaded, markers))
