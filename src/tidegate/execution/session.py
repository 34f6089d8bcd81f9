"""A writer session: the warehouse taken for the command's whole life, the ledger reconciled."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tidegate.domain.clock import Clock, Timer, stamp
from tidegate.domain.errors import UsageError
from tidegate.domain.model import ModelSpec, Version
from tidegate.domain.secrets import Secrets
from tidegate.engines.base import Engine
from tidegate.engines.factory import open_engine
from tidegate.execution.divergence import check_on_start
from tidegate.execution.executor import Executor
from tidegate.execution.orphans import stop_orphaned_jobs
from tidegate.execution.programs import ProjectStager
from tidegate.execution.readiness import refuse_unready, version_problems
from tidegate.execution.reconcile import Reconciliation, reconcile
from tidegate.project.loader import Project
from tidegate.state.base import StateStore
from tidegate.terminal import echo


@dataclass
class WriterSession:
    project: Project
    engine: Engine
    state: StateStore
    clock: Clock
    reconciliation: Reconciliation

    def active_spec(self, model: str) -> ModelSpec:
        version = self.state.active_version(model)
        if version is None:
            raise UsageError(
                f"model {model!r} has no active version; run `tidegate deploy {model}`"
            )
        return version.spec

    def refuse_unready(self, version: Version) -> None:
        """Refuse a backfill, rerun or recovery of `version` that the warehouse as it is now
        would fail partition by partition (a source column dropped, renamed or retyped under
        it)."""
        refuse_unready(version, version_problems(self.engine, self.project, version))

    def executor(self, timer: Timer) -> Executor:
        return Executor(
            self.engine,
            self.state,
            self.clock,
            timer,
            self.project.sources,
            self.active_spec,
            self.project.settings.taint.downstream,
            self.stager(timer),
            secrets=self.secrets,
        )

    def stager(self, timer: Timer, record: bool = True) -> ProjectStager:
        """The stager of the project's models; `record`: the jobs of command models are
        recorded with the attempts they ran for."""
        ledger = self.state if record else None
        return ProjectStager(self.project.root, ledger, self.clock, timer, self.secrets)

    @property
    def secrets(self) -> Secrets:
        return self.project.secrets()


@contextmanager
def writer_session(
    project: Project, state: StateStore, clock: Clock, wait: bool
) -> Iterator[WriterSession]:
    engine = open_engine(project, wait)
    try:
        engine.prepare()
        recovered = reconcile(engine, state, clock)
        for warning in check_on_start(engine, state, project, stamp(clock)):
            # before anything is written, whatever the command prints on stdout
            echo(warning, err=True)
        stop_orphaned_jobs(state, project.root, clock)
        yield WriterSession(project, engine, state, clock, recovered)
    finally:
        engine.close()
