"""Flink models: `models/NAME.toml` with `kind = "flink"`, a stream job released by savepoint.

```toml
kind = "flink"
job = "jobs/orders_per_day.py:build"
checkpoints = "state/orders_per_day"
parallelism = 1
env = ["LAKE_TOKEN"]
columns = { order_id = "BIGINT", day = "DATE", amount = "DOUBLE" }

[output]
path = "out/orders_per_day"
format = "csv"
```

The job's module is never imported here (it imports PyFlink, which only the supervisor needs):
its fingerprint covers its source and every project module it imports, read as text.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any

from tidegate.domain.errors import ConfigError
from tidegate.domain.model import Column, ModelKind, ModelSpec, Program
from tidegate.domain.partitions import Grain
from tidegate.domain.stream import StreamOutput, StreamSpec
from tidegate.project.config import IDENTIFIER
from tidegate.project.model_file import FlinkHeader, ModelFile, validate_header
from tidegate.project.python_model import code_files

FLINK_DISTRIBUTION = "apache-flink"
INSTALL_HINT = "pip install 'tidegate[flink]'"
# declaration keys of the other kinds a Flink model does not take
NOT_FOR_FLINK = (
    "time_column",
    "key_column",
    "keys",
    "key_sources",
    "start",
    "min_rows",
    "unique_key",
    "schedule",
    "deprecated",
    "checks",
    "reconciliations",
    "cursor_column",
)


def flink_model(
    root: Path, path: str, text: str, data: dict[str, Any]
) -> tuple[ModelFile, Program]:
    """A Flink model's declaration (`text`, parsed as `data`) and program."""
    header = validate_header(FlinkHeader, data, path, text, 1, 1)
    model = ModelFile(
        path=path, header=header, header_text=text, header_first_line=1, sql="", sql_first_line=1
    )
    job_file = root / header.job.rpartition(":")[0]
    if not job_file.is_file():
        raise ConfigError(
            path, f"job: {job_file.relative_to(root)} is not a file", model.header_line("job")
        )
    program = Program(kind=ModelKind.FLINK, entry=(header.job,), files=code_files(root, job_file))
    return model, program


def flink_spec(
    model: ModelFile, name: str, columns: tuple[Column, ...], program: Program
) -> ModelSpec:
    """The spec of a Flink model whose header and columns were read."""
    header = model.header
    assert isinstance(header, FlinkHeader)
    if header.grain is not Grain.TABLE:
        raise ConfigError(
            model.path,
            "grain: not for a Flink model (a stream has one job)",
            model.header_line("grain"),
        )
    model.refuse_declared(NOT_FOR_FLINK, lambda key: "not for a Flink model")
    for variable in header.env:
        if not IDENTIFIER.match(variable):
            raise ConfigError(
                model.path, f"env: {variable!r} is not a variable name", model.header_line("env")
            )
    names = [c.name for c in columns]
    for column in header.output.key:
        if column not in names:
            raise ConfigError(
                model.path,
                f"output.key: {column!r} is not in columns",
                model.header_line("output", "key"),
            )
    stream = StreamSpec(
        job=header.job,
        checkpoints=header.checkpoints,
        parallelism=header.parallelism,
        env=tuple(sorted(set(header.env))),
        output=StreamOutput(
            path=header.output.path,
            format=header.output.format,
            columns=tuple(c.name for c in columns),
            idempotent=header.output.idempotent,
            key=tuple(header.output.key),
        ),
        flink_version=installed_flink() or "",
        checkpoint_interval_ms=round(header.checkpoint_interval_seconds * 1000),
        confirm_checkpoints=header.confirm_checkpoints,
        confirm_timeout_seconds=header.confirm_timeout_seconds,
        restart_attempts=header.restart_attempts,
    )
    return ModelSpec(
        name=name,
        path=model.path,
        sql="",
        grain=Grain.TABLE,
        partition_column="",
        columns=columns,
        program=program,
        stream=stream,
    )


def installed_flink() -> str | None:
    """The version of PyFlink installed beside tidegate, if it is (read without importing it)."""
    try:
        return metadata.version(FLINK_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
