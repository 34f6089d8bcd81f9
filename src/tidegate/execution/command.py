"""Running a command model's job for a unit and staging the Parquet files it wrote.

Each run gets a fresh folder under `.tidegate/staging/` named by its first attempt: `inputs/`
holds the windows of what the model reads as Parquet (the job cannot open an embedded warehouse
that tidegate holds), `output/` is where the job writes. The job runs in its own process group,
which is killed on a timeout, on an interrupt, and after the job exits (so that nothing it left
behind writes on). Only a job that exited 0 within its time has its output staged; the folder
is removed either way, so a failed job's partial output can never be read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tidegate.domain.clock import Clock, Timer, stamp
from tidegate.domain.command import (
    CommandRecord,
    job_environment,
    job_redactor,
    masked,
    secret_uses,
    tail,
)
from tidegate.domain.errors import ModelError
from tidegate.domain.model import Column, ModelSpec, Program, Version
from tidegate.domain.partitions import to_utc
from tidegate.domain.secrets import Redactor, Secrets
from tidegate.engines.base import Engine
from tidegate.execution.unit import ReadFrom, Unit
from tidegate.project.code_files import PLACEHOLDER, referenced_files, require_unchanged
from tidegate.state.base import StateStore

STAGING_DIR = Path(".tidegate") / "staging"
# rows per batch read from the job's Parquet files: what staging holds in memory at a time
BATCH_ROWS = 65_536


class CommandStage:
    """Runs command models' jobs, recording each in `state` with the attempts it ran for (None:
    not recorded); `interrupt` kills every job running (a second Ctrl-C)."""

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
        # the project's secrets and tidegate's environment, which jobs get a few variables of
        self.secrets = secrets
        self._running: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()

    def stage(
        self,
        engine: Engine,
        version: Version,
        unit: Unit,
        staging: str,
        inputs: Mapping[str, ReadFrom],
    ) -> None:
        program = _program(version.spec)
        require_unchanged(program.files, referenced_files(self.root, program.entry))

        def arguments(values: Mapping[str, str]) -> list[str]:
            return [PLACEHOLDER.sub(lambda m: values[m.group(1)], a) for a in program.entry]

        self.run_job(engine, version.spec, unit, staging, inputs, arguments)

    def run_job(
        self,
        engine: Engine,
        spec: ModelSpec,
        unit: Unit,
        staging: str,
        inputs: Mapping[str, ReadFrom],
        arguments: Callable[[Mapping[str, str]], list[str]],
    ) -> None:
        """Run the job whose command line `arguments` makes of the placeholders' values (with
        the model's env and timeout) in a fresh folder, and stage its output."""
        program = _program(spec)
        attempts = list(unit.attempts.values())
        folder = self.root / STAGING_DIR / attempts[0]
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "output").mkdir(parents=True)
        (folder / "inputs").mkdir()
        try:
            _export_inputs(engine, unit.bounds(spec), bool(spec.keys), inputs, folder / "inputs")
            values = _placeholders(spec.name, unit, spec.keys, folder)
            argv = arguments(values)
            environment = _environment(program, values, self.secrets)
            redact = job_redactor(program, self.secrets)
            shown = {**_tidegate_variables(values), **masked(program.env)}
            record = CommandRecord(
                tuple(redact(a) for a in argv),
                {name: redact(value) for name, value in shown.items()},
                stamp(self.clock),
            )
            self._run(argv, environment, folder, program.timeout_seconds, attempts, record, redact)
            _stage_output(engine, staging, folder / "output", spec.columns)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def interrupt(self) -> None:
        with self._lock:
            for process in self._running.values():
                _kill_group(process)

    def _run(
        self,
        argv: list[str],
        environment: dict[str, str],
        folder: Path,
        timeout: float | None,
        attempts: list[str],
        record: CommandRecord,
        redact: Redactor,
    ) -> None:
        began = self.timer.monotonic()
        with (folder / "stdout.log").open("wb") as out, (folder / "stderr.log").open("wb") as err:
            try:
                process = subprocess.Popen(
                    argv,
                    cwd=self.root,
                    env=environment,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,  # its own process group, killed as one
                )
            except OSError as error:
                raise ModelError(f"command {argv[0]!r} cannot start: {error.strerror}") from None
            with self._lock:
                self._running[process.pid] = process
            started = replace(record, pid=process.pid)
            timed_out = False
            try:
                self._record(attempts, started)
                code = process.wait(timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process)
                code = process.wait()
            finally:
                _kill_group(process)
                with self._lock:
                    self._running.pop(process.pid, None)
        stderr = tail((folder / "stderr.log").read_bytes(), redact)
        if not stderr.strip():
            # some tools (dbt among them) print their errors on stdout: keep its end instead
            stderr = tail((folder / "stdout.log").read_bytes(), redact)
        self._record(
            attempts,
            replace(
                started,
                exit_code=code,
                duration_ms=round((self.timer.monotonic() - began) * 1000),
                stderr_tail=stderr,
                ended_at=stamp(self.clock),
            ),
        )
        last = stderr.strip().splitlines()[-1:] or ["no output"]
        if timed_out:
            raise ModelError(
                f"command timed out after {timeout:g} s: its process group was killed and its "
                f"output discarded ({last[0]})"
            )
        if code != 0:
            raise ModelError(
                f"command exited with code {code}: its output was discarded ({last[0]})"
            )

    def _record(self, attempts: list[str], record: CommandRecord) -> None:
        if self.state is not None:
            self.state.record_command(attempts, record)


def _program(spec: ModelSpec) -> Program:
    if spec.program is None:
        raise TypeError(f"{spec.name} is an SQL model")
    return spec.program


def _placeholders(model: str, unit: Unit, keys: tuple[str, ...], folder: Path) -> dict[str, str]:
    values = {
        "python": sys.executable,
        "model": model,
        "output": str((folder / "output").resolve()),
        "inputs": str((folder / "inputs").resolve()),
    }
    if keys:
        values["key"] = unit.partitions[0].label(keys)
    else:
        values["start"] = to_utc(unit.window.start).isoformat()
        values["end"] = to_utc(unit.window.end).isoformat()
    return values


def _tidegate_variables(values: Mapping[str, str]) -> dict[str, str]:
    return {f"TIDEGATE_{name.upper()}": value for name, value in values.items()}


def _environment(program: Program, values: Mapping[str, str], secrets: Secrets) -> dict[str, str]:
    """What the job runs with: a few variables of tidegate's environment, the model's own and
    the TIDEGATE_* variables of the run (bounds, output and inputs folders); never one that
    holds a secret of tidegate's."""
    # the loader refuses such a model, but a version runs as it was built, perhaps before
    # tidegate.toml named the variable a secret
    uses = secret_uses(program.env, program.passthrough, secrets.variables)
    if uses:
        raise ModelError(uses[0].message())
    try:
        return job_environment(
            secrets.environ,
            program.env,
            program.passthrough,
            _tidegate_variables(values),
            secrets.variables,
        )
    except KeyError as missing:
        raise ModelError(
            f"env: ${{{missing.args[0]}}} is not set in tidegate's environment"
        ) from None


def _export_inputs(
    engine: Engine,
    bounds: Mapping[str, Any],
    keyed: bool,
    inputs: Mapping[str, ReadFrom],
    folder: Path,
) -> None:
    """Each declared input's rows in the unit's window (whole for a key-list partition), as
    `NAME.parquet`."""
    import pyarrow.parquet as pq

    for name, origin in inputs.items():
        rows = engine.read_arrow(origin.table, None if keyed else origin.time_column, bounds)
        pq.write_table(rows, folder / f"{name}.parquet")


def _stage_output(engine: Engine, staging: str, output: Path, columns: Sequence[Column]) -> None:
    """Stage the job's Parquet files batch by batch, each cast to the declared columns."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from tidegate.execution.arrow_rows import check_names, conformed_reader, contract_schema

    schema = contract_schema(columns)
    try:
        found = ds.dataset(output, format="parquet")
        if not found.files:
            engine.stage_arrow(staging, schema.empty_table())
            return
        check_names(list(found.schema.names), schema)
        batches = iter(found.to_batches(batch_size=BATCH_ROWS))
        engine.stage_arrow(staging, conformed_reader(batches, schema))
    except (pa.ArrowException, OSError) as error:
        raise ModelError(
            f"the command's output is not Parquet of the declared columns: "
            f"{str(error).splitlines()[0]}"
        ) from None


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
