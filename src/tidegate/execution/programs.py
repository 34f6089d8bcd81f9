"""The stager of a project's writer session: each model kind computed its own way.

Python, command and dbt models need pyarrow, imported only when one runs: SQL-only projects neither
pay for it nor need it installed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tidegate.domain.clock import Clock, Timer
from tidegate.domain.errors import ModelError
from tidegate.domain.model import ModelKind, Version
from tidegate.domain.secrets import Secrets
from tidegate.engines.base import Engine
from tidegate.execution.unit import QueryStager, ReadFrom, Unit
from tidegate.state.base import StateStore

if TYPE_CHECKING:
    from tidegate.execution.command import CommandStage

PYARROW_HINT = "Python, command and dbt models need pyarrow: pip install 'tidegate[python]'"


class ProjectStager:
    def __init__(
        self,
        root: Path,
        state: StateStore | None,
        clock: Clock,
        timer: Timer,
        secrets: Secrets,
    ) -> None:
        self.root = root
        self.state = state
        self.clock = clock
        self.timer = timer
        self.secrets = secrets
        self.query = QueryStager()
        self._commands: CommandStage | None = None
        self._lock = threading.Lock()

    def stage(
        self,
        engine: Engine,
        version: Version,
        unit: Unit,
        staging: str,
        inputs: Mapping[str, ReadFrom],
    ) -> None:
        kind = version.spec.kind
        if kind is ModelKind.SQL:
            self.query.stage(engine, version, unit, staging, inputs)
            return
        try:
            import pyarrow  # noqa: F401  (present, or a clear reason)
        except ImportError:
            raise ModelError(PYARROW_HINT) from None
        if kind is ModelKind.PYTHON:
            from tidegate.execution.python_model import stage_python

            stage_python(self.root, engine, version, unit, staging, inputs)
        elif kind is ModelKind.DBT:
            from tidegate.execution.dbt import stage_dbt

            stage_dbt(self._command_stage(), engine, version, unit, staging, inputs)
        else:
            self._command_stage().stage(engine, version, unit, staging, inputs)

    def interrupt(self) -> None:
        if self._commands is not None:
            self._commands.interrupt()

    def _command_stage(self) -> CommandStage:
        # one per session, shared by the worker threads: interrupt reaches every job
        with self._lock:
            if self._commands is None:
                from tidegate.execution.command import CommandStage

                self._commands = CommandStage(
                    self.root, self.state, self.clock, self.timer, self.secrets
                )
            return self._commands
