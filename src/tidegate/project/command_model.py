"""Command models: `models/NAME.toml`, the shared declaration keys plus the command that
computes the rows, its environment and timeout.

```toml
grain = "day"
time_column = "order_date"
sources = ["orders"]
command = ["python", "jobs/revenue.py", "--start", "{start}", "--output", "{output}"]
timeout_seconds = 600
env = { WAREHOUSE_TOKEN = "${REVENUE_TOKEN}" }
env_passthrough = ["AWS_PROFILE"]
```

The job gets a minimal environment, never tidegate's whole one (see domain/command.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tidegate.domain.errors import ConfigError
from tidegate.domain.model import ModelKind, Program
from tidegate.domain.partitions import Grain
from tidegate.project.code_files import PLACEHOLDER, referenced_files
from tidegate.project.config import IDENTIFIER
from tidegate.project.model_file import CommandHeader, JobHeader, ModelFile, validate_header

# ${NAME}: the value of an environment variable of tidegate's own environment
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ALWAYS = ("output", "inputs", "model", "python")


def command_model(
    root: Path, path: str, text: str, data: dict[str, Any]
) -> tuple[ModelFile, Program]:
    """A command model's declaration (`text`, parsed as `data`) and program."""
    header = validate_header(CommandHeader, data, path, text, 1, 1)
    model = ModelFile(
        path=path, header=header, header_text=text, header_first_line=1, sql="", sql_first_line=1
    )
    _check_placeholders(model, header)
    env, passthrough = job_environment(model, header)
    program = Program(
        kind=ModelKind.COMMAND,
        entry=tuple(header.command),
        files=referenced_files(root, header.command),
        env=env,
        passthrough=passthrough,
        timeout_seconds=header.timeout_seconds,
    )
    return model, program


def job_environment(
    model: ModelFile, header: JobHeader
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The job's declared variables (sorted) and the names it passes through, checked. Whether
    one of them is a secret of the project's is the loader's to check: it knows the project."""
    for name, value in header.env.items():
        if not IDENTIFIER.match(name):
            raise ConfigError(
                model.path, f"env: {name!r} is not a variable name", model.header_line("env", name)
            )
        if "$" in REFERENCE.sub("", value):
            raise ConfigError(
                model.path,
                f"env.{name}: a `$` starts a reference written ${{NAME}}",
                model.header_line("env", name),
            )
    line = model.header_line("env_passthrough")
    for name in header.env_passthrough:
        if not VARIABLE.match(name):
            raise ConfigError(model.path, f"env_passthrough: {name!r} is not a variable name", line)
        if name in header.env:
            raise ConfigError(model.path, f"env_passthrough: {name} is declared in env too", line)
    return tuple(sorted(header.env.items())), tuple(sorted(set(header.env_passthrough)))


def allowed_placeholders(grain: Grain) -> tuple[str, ...]:
    return (*ALWAYS, *(("key",) if grain is Grain.KEY else ("start", "end")))


def _check_placeholders(model: ModelFile, header: CommandHeader) -> None:
    allowed = allowed_placeholders(header.grain)
    for argument in header.command:
        for name in PLACEHOLDER.findall(argument):
            if name not in allowed:
                hint = ", ".join(f"{{{a}}}" for a in allowed)
                raise ConfigError(
                    model.path,
                    f"command: {{{name}}} is not a placeholder here (use {hint})",
                    model.header_line("command"),
                )
