"""Following a detached backfill on Airflow's triggerer: `tidegate show run RUN --json` every
`poll_interval` seconds until the run is no longer running. The trigger is its run id and project:
a triggerer that restarts builds it again from those and goes on polling the same run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from tidegate.orchestration import OrchestrationError, run_document

# `show run` failing this many times in a row ends the wait (the project is gone, the ledger
# unreadable); single failures are retried at the next poll
READ_FAILURES = 5


class TidegateRunTrigger(BaseTrigger):
    """Fires once the run has ended: `{"run_id", "status", "reason"}`, status `show run`'s (or
    `error` when the run could not be read)."""

    def __init__(
        self,
        run_id: str,
        project: str,
        program: Sequence[str] | None = None,
        poll_interval: float = 30.0,
    ) -> None:
        super().__init__()
        self.run_id = run_id
        self.project = project
        self.program = list(program) if program else None
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "run_id": self.run_id,
                "project": self.project,
                "program": self.program,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        failures = 0
        while True:
            try:
                run = await asyncio.to_thread(
                    run_document, self.run_id, Path(self.project), program=self.program
                )
            except OrchestrationError as error:
                failures += 1
                self.log.warning("reading tidegate run %s failed: %s", self.run_id, error)
                if failures >= READ_FAILURES:
                    yield TriggerEvent(
                        {"run_id": self.run_id, "status": "error", "reason": str(error)}
                    )
                    return
            else:
                failures = 0
                status = str(run.get("status"))
                if status != "running":
                    self.log.info("tidegate run %s ended: %s", self.run_id, status)
                    yield TriggerEvent(
                        {"run_id": self.run_id, "status": status, "reason": run.get("reason")}
                    )
                    return
                self.log.info("tidegate run %s is running", self.run_id)
            await asyncio.sleep(self.poll_interval)
