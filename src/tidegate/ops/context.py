"""What every command gets: where the project is, what "now" is, who is acting."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field
from pathlib import Path

from tidegate.domain.clock import Clock, SystemClock
from tidegate.project.loader import Project, load_project
from tidegate.state.base import StateStore
from tidegate.state.factory import open_state


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
    _project: Project | None = None
    _state: StateStore | None = None

    @property
    def project(self) -> Project:
        if self._project is None:
            self._project = load_project(self.project_dir)
        return self._project

    @property
    def state(self) -> StateStore:
        if self._state is None:
            self._state = open_state(self.project.state_path)
        return self._state

    def close(self) -> None:
        if self._state is not None:
            self._state.close()
            self._state = None
