"""TidegateOperator: one tidegate command (`run`, `backfill`, `rerun`, `recover`) for one model per
task, its exit code mapped onto the task's outcome (tidegate.airflow.outcomes), the partitions it
published emitted as partitioned asset events on the model's asset and pushed to XCom."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger
from airflow.sdk import Asset, BaseOperator, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from tidegate import orchestration
from tidegate.airflow.assets import model_asset
from tidegate.airflow.lineage import parent_environment
from tidegate.airflow.naming import partition_key
from tidegate.airflow.outcomes import (
    Verdict,
    exit_code_of_status,
    partitions_of,
    summary,
    verdict,
)
from tidegate.airflow.trigger import TidegateRunTrigger
from tidegate.orchestration import Invocation, Outcome, invoke, published, run_document

# how to start tidegate when the operator is not told (a path, or a command line such as
# `/opt/venv/bin/python -m tidegate`); without it, tidegate beside Airflow's interpreter or on PATH
EXECUTABLE_VARIABLE = "TIDEGATE_EXECUTABLE"


class TidegateOperator(BaseOperator):
    """`tidegate COMMAND MODEL [--partitions P] [OPTIONS] --project PROJECT --json` in a process of
    its own. `partitions` defaults to the DAG run's partition key (a partitioned timetable's). With
    `deferrable=True` a backfill is started detached and followed on the triggerer; a busy model
    is then waited for on the triggerer too (`busy_delay` seconds, `busy_attempts` times), where
    otherwise the task fails and Airflow retries it after its `retry_delay`."""

    # not `model`: its asset is named when the DAG is parsed
    template_fields: Sequence[str] = ("partitions", "options")
    ui_color = "#dbe7ff"

    def __init__(
        self,
        *,
        command: str,
        model: str,
        project: str | Path,
        partitions: str | None = None,
        options: Sequence[str] = (),
        deferrable: bool = False,
        poll_interval: float = 30.0,
        busy_delay: float = 60.0,
        busy_attempts: int = 10,
        tidegate: str | Sequence[str] | None = None,
        env: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        if command not in orchestration.COMMANDS:
            raise ValueError(
                f"command must be one of {', '.join(orchestration.COMMANDS)}: {command!r}"
            )
        self.asset: Asset = model_asset(model, project)
        outlets = list(kwargs.pop("outlets", None) or [])
        if self.asset not in outlets:
            outlets.append(self.asset)
        super().__init__(outlets=outlets, **kwargs)
        self.command = command
        self.model = model
        self.project = str(project)
        self.partitions = partitions
        self.options = list(options)
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.busy_delay = busy_delay
        self.busy_attempts = busy_attempts
        self.tidegate = tidegate
        self.env = dict(env or {})

    # --- Airflow's entry points ---------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        return self._start(context, busy_tries=0)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """A detached backfill ended (TidegateRunTrigger's event)."""
        status = str(event.get("status"))
        self.log.info("tidegate run %s ended: %s", event.get("run_id"), status)
        document = {"run_id": event.get("run_id"), "reason": event.get("reason") or status}
        return self._finish(context, Outcome(exit_code_of_status(status), document), 0)

    def execute_when_free(
        self, context: Context, event: Any = None, busy_tries: int = 0
    ) -> dict[str, Any]:
        """The model was busy: try again after the delay."""
        return self._start(context, busy_tries=busy_tries)

    # --- the command ----------------------------------------------------------------------------

    def _start(self, context: Context, busy_tries: int) -> dict[str, Any]:
        invocation = self._invocation(context)
        self.log.info("tidegate %s", shlex.join(invocation.arguments()))
        outcome = invoke(invocation, program=self._program(), env=self._environment(context))
        if self.deferrable and self.command == "backfill" and outcome.succeeded:
            run_id = outcome.run_id
            if run_id is None:
                raise AirflowException("tidegate backfill --detach printed no run id")
            self.log.info("tidegate run %s started detached; following it", run_id)
            self.defer(
                trigger=TidegateRunTrigger(
                    run_id, self.project, self._program(), self.poll_interval
                ),
                method_name="execute_complete",
            )
        return self._finish(context, outcome, busy_tries)

    def _invocation(self, context: Context) -> Invocation:
        partitions = self.partitions or context.get("partition_key") or None
        options = list(self.options)
        if self.deferrable and self.command == "backfill":
            options.append("--detach")
        return Invocation(self.command, self.model, partitions, Path(self.project), tuple(options))

    def _finish(self, context: Context, outcome: Outcome, busy_tries: int) -> dict[str, Any]:
        found = verdict(outcome.exit_code)
        if outcome.run_id is not None:
            context["ti"].xcom_push(key="run_id", value=outcome.run_id)
        if found is Verdict.SUCCEEDED:
            return self._published(context, outcome)
        message = f"tidegate {self.command} {self.model}: {outcome.reason}"
        if found is Verdict.SKIP:
            raise AirflowSkipException(message)
        if found is Verdict.FAIL:
            raise AirflowFailException(message)
        if found is Verdict.BUSY:
            self._wait_until_free(message, busy_tries)
        raise AirflowException(message)

    def _wait_until_free(self, message: str, busy_tries: int) -> None:
        """Defer for `busy_delay` seconds, then run the command again (deferrable only, at most
        `busy_attempts` times); returns when the task is to fail and be retried instead."""
        if not self.deferrable or busy_tries >= self.busy_attempts:
            return
        self.log.info("%s; trying again in %s s", message, self.busy_delay)
        self.defer(
            trigger=TimeDeltaTrigger(timedelta(seconds=self.busy_delay)),
            method_name="execute_when_free",
            kwargs={"busy_tries": busy_tries + 1},
        )

    def _published(self, context: Context, outcome: Outcome) -> dict[str, Any]:
        """The run's published partitions: asset events on the model's asset, and XCom."""
        run_id = outcome.run_id
        done = [] if run_id is None else published(self._run(run_id))
        values = summary(self.command, self.model, outcome, done)
        keys = [partition_key(p) for p in partitions_of(self.model, values)]
        if keys:
            context["outlet_events"][self.asset].add_partitions(keys)
        self.log.info("tidegate %s %s published %s", self.command, self.model, keys or "nothing")
        for key in ("published", "versions", "checksums"):
            context["ti"].xcom_push(key=key, value=values[key])
        return values

    def _run(self, run_id: str) -> dict[str, Any]:
        return dict(run_document(run_id, Path(self.project), program=self._program()))

    def _program(self) -> list[str] | None:
        chosen = self.tidegate or os.environ.get(EXECUTABLE_VARIABLE)
        if not chosen:
            return None
        return shlex.split(chosen) if isinstance(chosen, str) else list(chosen)

    def _environment(self, context: Context) -> dict[str, str]:
        return {**parent_environment(context["ti"]), **self.env}
