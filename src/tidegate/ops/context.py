"""What every command gets: where the project is, what "now" is, who is acting."""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tidegate.domain import schedule
from tidegate.domain.attempt import RunStatus
from tidegate.domain.clock import Clock, SystemClock, stamp
from tidegate.ops.ledger_guard import refuse_lost_ledger
from tidegate.project import cache
from tidegate.project.view import ProjectView
from tidegate.state.factory import open_state

if TYPE_CHECKING:
    from tidegate.project.loader import Project
    from tidegate.state.base import StateStore


def current_user() -> str:
    try:
        return os.environ.get("TIDEGATE_USER") or getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@dataclass
class Context:
    project_dir: Path
    clock: Clock = field(default_factory=SystemClock)
    actor: str = field(default_factory=current_user)
    wait: bool = False
    # `verify --rebuild-ledger` opens the empty ledger a lost one is refused for, to fill it
    rebuilding: bool = False
    _project: Project | None = None
    _view: ProjectView | None = None
    _state: StateStore | None = None
    # the schedules' windows of fires when the command started (kept at its end if it found more)
    _fires: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def project(self) -> Project:
        """The project, every file loaded and checked (what writers need)."""
        if self._project is None:
            from tidegate.project.loader import load_project

            self._project = load_project(self.project_dir)
        return self._project

    @property
    def view(self) -> ProjectView:
        """What the ledger's readers need of the project: from the project cache while the
        project's files are unchanged, else from loading it."""
        if self._view is None:
            from tidegate.project.cache import read_view

            found = None if self._project is not None else read_view(self.project_dir)
            self._view = found or self.project.view()
        return self._view

    @property
    def state(self) -> StateStore:
        if self._state is None:
            view = self.view
            state = open_state(view.root, view.state)
            try:
                if not self.rebuilding:
                    refuse_lost_ledger(view, state, lambda: self.project)
            except BaseException:
                state.close()
                raise
            self._state = state
        return self._state

    @contextmanager
    def closing_run(self, run_id: str, interrupted: str = "interrupted (Ctrl-C)") -> Iterator[None]:
        """Close the run if its work is cut short: a run must never stay "running" after its
        process has gone on. Attempts left mid-way are settled by the next writer from the
        warehouse markers."""
        try:
            yield
        except KeyboardInterrupt:
            self.state.finish_run(run_id, RunStatus.INTERRUPTED, interrupted, stamp(self.clock))
            raise
        except Exception as error:
            # what cut the run short is kept as its reason: masked like an attempt's error
            reason = self.project.secrets().redactor()(f"aborted: {error}")
            self.state.finish_run(run_id, RunStatus.FAILED, reason, stamp(self.clock))
            raise

    def __post_init__(self) -> None:
        schedule.learn(cache.fire_windows(self.project_dir))
        self._fires = schedule.windows()

    def close(self) -> None:
        if self._state is not None:
            self._state.close()
            self._state = None
        found = schedule.windows()
        if found != self._fires:
            cache.keep_fire_windows(self.project_dir, found)
            self._fires = found
