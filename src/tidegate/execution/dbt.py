"""Running a dbt model: tidegate's own dbt (dbt-core and dbt-duckdb in a virtual environment
of their own, `.tidegate/dbt-venv`, or TIDEGATE_DBT_VENV) runs the model for a batch, its
bounds and folders given as vars, with a profile of tidegate's: an in-memory DuckDB in UTC. The
model writes Parquet into `var('output')` (dbt-duckdb's external materialization) and reads
what tidegate exported into `var('inputs')`; the job is then recorded, audited and published as
a command model's."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from tidegate.domain.model import Version
from tidegate.engines.base import Engine
from tidegate.execution.command import CommandStage
from tidegate.execution.tool_venv import tool_executable
from tidegate.execution.unit import ReadFrom, Unit
from tidegate.project.code_files import require_unchanged
from tidegate.project.dbt_model import project_files

DBT_REQUIREMENTS = ("dbt-core>=1.8,<1.12", "dbt-duckdb>=1.8", "dbt-postgres>=1.8")
VENV_VARIABLE = "TIDEGATE_DBT_VENV"
PROFILE = "tidegate"


def profiles(database: Path) -> str:
    """profiles.yml: the `tidegate` profile, a DuckDB of the run's own, in UTC (JSON is YAML)."""
    output = {
        "type": "duckdb",
        "path": str(database),
        "threads": 1,
        "settings": {"TimeZone": "UTC"},
    }
    return json.dumps({PROFILE: {"target": "run", "outputs": {"run": output}}}, indent=2)


def dbt_executable(root: Path) -> Path:
    """tidegate's dbt, installed on first use (one installer at a time, across processes)."""
    named = os.environ.get(VENV_VARIABLE)
    venv = Path(named or root / ".tidegate" / "dbt-venv")
    return tool_executable(venv, DBT_REQUIREMENTS, "dbt", named=bool(named))


def stage_dbt(
    commands: CommandStage,
    engine: Engine,
    version: Version,
    unit: Unit,
    staging: str,
    inputs: Mapping[str, ReadFrom],
) -> None:
    spec, program = version.spec, version.spec.program
    if program is None:
        raise TypeError(f"{spec.name} is an SQL model")
    project, model = program.entry
    require_unchanged(program.files, project_files(commands.root, project))
    dbt = dbt_executable(commands.root)

    def arguments(values: Mapping[str, str]) -> list[str]:
        # the run's own folder, beside its output: its profile, DuckDB file, target and logs
        folder = Path(values["output"]).parent
        (folder / "profiles.yml").write_text(profiles(folder / "dbt.duckdb"))
        bounds = {k: values[k] for k in ("start", "end", "key", "inputs", "output") if k in values}
        return [
            str(dbt),
            "run",
            "--project-dir",
            str((commands.root / project).resolve()),
            "--profiles-dir",
            str(folder),
            "--profile",
            PROFILE,
            "--target-path",
            str(folder / "target"),
            "--log-path",
            str(folder / "logs"),
            "--select",
            model,
            "--vars",
            json.dumps(bounds, sort_keys=True),
        ]

    commands.run_job(engine, spec, unit, staging, inputs, arguments)
