"""PyFlink, the one module that imports it: a job started on a local MiniCluster inside this
process's JVM, watched through the MiniCluster's REST API, stopped with a savepoint or
cancelled.

Pitfalls handled here (PyFlink 2.x): the Python workers must be told which interpreter to run
(`python.executable`), or a job restarts forever; restarts are bounded, so a job that cannot
run fails instead of cycling RUNNING and RESTARTING; PyFlink's `JobClient.stop_with_savepoint`
calls a Java method that no longer exists, so the Java client's own
`stopWithSavepoint(drain, directory, format)` is called; the workers import the job's module by
its dotted name from the version's own copy of its code (`python.files`).
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidegate.domain.errors import ModelError
from tidegate.domain.stream import JobStatus
from tidegate.flink.rest import JobMetrics, job_metrics, latest_exception, root_cause

SAVEPOINT_TIMEOUT_SECONDS = 120.0
# the restart strategy's delay: long enough that a status poll sees RESTARTING
RESTART_DELAY = "1 s"


@dataclass(frozen=True)
class Launch:
    """Everything a job start needs, resolved to absolute places."""

    workdir: Path  # the project folder: the job's function runs in it
    code: Path  # the version's code (places.code_of): the job's imports resolve from it
    module: str  # the job's module, dotted (jobs.orders_per_day)
    function: str
    name: str  # the Flink job name
    output: Path
    checkpoints: Path
    restore: str | None  # a savepoint or checkpoint to start from
    parallelism: int
    checkpoint_interval_ms: int
    restart_attempts: int


class JobLost(ModelError):
    """The job or its MiniCluster stopped answering (its JVM gone, a savepoint that failed)."""


class RunningJob:
    """A job submitted to a MiniCluster of this process."""

    def __init__(self, client: Any, port: int) -> None:
        self._client = client
        self.job_id = str(client.get_job_id())
        self.port = port
        self._final: JobStatus | None = None

    @property
    def address(self) -> str:
        """The MiniCluster's REST API and web UI, while the job runs."""
        return f"http://127.0.0.1:{self.port}"

    def status(self) -> JobStatus:
        if self._final is not None:
            return self._final
        try:
            name = str(self._client.get_job_status().result().name)
        except Exception as error:
            # a MiniCluster shuts down once its job has ended
            if "already been shut down" not in str(error):
                raise JobLost(
                    f"lost the Flink job {self.job_id}: {root_cause(str(error))}"
                ) from None
            self._final = self._ended()
            return self._final
        return JobStatus(name)

    def metrics(self) -> JobMetrics:
        try:
            return job_metrics(self.port, self.job_id)
        except (OSError, ValueError, KeyError) as error:
            raise JobLost(f"the Flink job {self.job_id} does not answer: {error}") from None

    def failure(self) -> str | None:
        """The root cause of the job's failure, or of its newest restart, one line."""
        if self.status().ended:
            try:
                self._client.get_job_execution_result().result()
            except Exception as error:
                return root_cause(str(error))
            return None
        try:
            return latest_exception(self.port, self.job_id)
        except (OSError, ValueError):
            return None

    def stop_with_savepoint(self, directory: Path) -> str:
        """Stop the job, its state in a savepoint under `directory`; returns the savepoint."""
        from pyflink.java_gateway import get_gateway

        canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
        try:
            future = self._client._j_job_client.stopWithSavepoint(
                False, directory.resolve().as_uri(), canonical
            )
            path = str(future.get())
        except Exception as error:
            raise JobLost(
                f"stopping the Flink job {self.job_id} with a savepoint failed: "
                f"{root_cause(str(error))}"
            ) from None
        self._final = JobStatus.FINISHED
        return path

    def cancel(self) -> None:
        if self.status().ended:
            return
        self._client.cancel().result()
        self._final = JobStatus.CANCELED

    def _ended(self) -> JobStatus:
        try:
            self._client.get_job_execution_result().result()
        except Exception:
            return JobStatus.FAILED
        return JobStatus.FINISHED


def start(launch: Launch) -> RunningJob:
    """Build the job from the project's function and submit it; ModelError when it does not
    start (its function fails, or its restore point's state maps to no operator of it)."""
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment

    # Flink's own logs: beside the stream's checkpoints, not in PyFlink's installed folder
    os.environ.setdefault("FLINK_LOG_DIR", str((launch.checkpoints / "logs").resolve()))
    port = _free_port()
    config = Configuration()
    for key, value in _settings(launch, port).items():
        config.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    build = _function(launch)
    here = os.getcwd()
    os.chdir(launch.workdir)  # relative paths in the job's function are the project's
    try:
        build(env, str(launch.output.resolve()))
    except Exception as error:
        raise ModelError(f"{launch.module}:{launch.function} failed: {error}") from None
    finally:
        os.chdir(here)
    try:
        client = env.execute_async(launch.name)
    except Exception as error:
        # a restore point whose state maps to no operator is refused here ("Cannot map …")
        raise ModelError(f"{launch.name} did not start: {root_cause(str(error))}") from None
    return RunningJob(client, port)


def _settings(launch: Launch, port: int) -> dict[str, str]:
    settings = {
        # without it the workers run `python` from PATH and the job restarts forever
        "python.executable": sys.executable,
        # the workers import the job's module from the version's code
        "python.files": str(launch.code),
        "parallelism.default": str(launch.parallelism),
        "execution.checkpointing.interval": f"{launch.checkpoint_interval_ms} ms",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "execution.checkpointing.storage": "filesystem",
        "execution.checkpointing.dir": launch.checkpoints.resolve().as_uri(),
        "execution.checkpointing.savepoint-dir": (launch.checkpoints / "savepoints")
        .resolve()
        .as_uri(),
        # a checkpoint outlives a cancelled or killed job: it is a restore point
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": str(launch.restart_attempts),
        "restart-strategy.fixed-delay.delay": RESTART_DELAY,
        # the REST API's restart and checkpoint counts refresh this often (default 10 s)
        "metrics.fetcher.update-interval": "500",
        "rest.cache.execution-graph.timeout": "200",
        "web.refresh-interval": "500",
        "rest.port": str(port),
        "rest.bind-port": str(port),
        "rest.address": "127.0.0.1",
        "rest.bind-address": "127.0.0.1",
    }
    if launch.restore is not None:
        # never `ignore-unclaimed-state`: state that maps to no operator is refused, not dropped
        settings["execution.state-recovery.path"] = launch.restore
        settings["execution.state-recovery.ignore-unclaimed-state"] = "false"
    return settings


def _function(launch: Launch) -> Callable[[Any, str], None]:
    """The job's function, imported from the version's code: modules of another version's
    code imported before are forgotten first."""
    code, kept = str(launch.code), str(launch.code.parent)
    for name, module in list(sys.modules.items()):
        places = [getattr(module, "__file__", None) or "", *getattr(module, "__path__", [])]
        if any(str(place).startswith(kept) for place in places):
            del sys.modules[name]
    sys.path[:] = [code, *(p for p in sys.path if not p.startswith(kept))]
    importlib.invalidate_caches()
    try:
        module = importlib.import_module(launch.module)
    except Exception as error:
        raise ModelError(f"importing {launch.module} failed: {error}") from None
    function = getattr(module, launch.function, None)
    if not callable(function):
        raise ModelError(f"{launch.module} has no function {launch.function!r}")
    return function  # type: ignore[no-any-return]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
