"""dbt models: `models/NAME.toml` with `kind = "dbt"`, naming a dbt project folder inside the
tidegate project and one of its models.

```toml
kind = "dbt"
dbt_project = "dbt"
dbt_model = "daily_revenue"
grain = "day"
time_column = "order_date"
sources = ["orders"]
```

The fingerprint covers every file of the dbt project that decides what it computes (its SQL,
macros, YAML; not `target/`, `logs/`, `dbt_packages/`) and the newest commit that changed the
folder, when it is in a repository.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tidegate.domain.errors import ConfigError
from tidegate.domain.model import ModelKind, Program
from tidegate.project.code_files import Digests, digest
from tidegate.project.command_model import job_environment
from tidegate.project.model_file import DbtHeader, ModelFile, validate_header

# what dbt writes into its project folder: not part of the code
GENERATED = frozenset({"target", "logs", "dbt_packages", ".user.yml"})
CODE_SUFFIXES = frozenset({".sql", ".yml", ".yaml", ".csv", ".py", ".md"})


def dbt_model(root: Path, path: str, text: str, data: dict[str, Any]) -> tuple[ModelFile, Program]:
    header = validate_header(DbtHeader, data, path, text, 1, 1)
    model = ModelFile(
        path=path, header=header, header_text=text, header_first_line=1, sql="", sql_first_line=1
    )
    folder = (root / header.dbt_project).resolve()
    if not folder.is_relative_to(root.resolve()) or not (folder / "dbt_project.yml").is_file():
        raise ConfigError(
            path,
            f"dbt_project: {header.dbt_project!r} is not a dbt project folder inside the "
            "project (no dbt_project.yml)",
            model.header_line("dbt_project"),
        )
    files = project_files(root, header.dbt_project)
    if not any(Path(p).name == f"{header.dbt_model}.sql" for p, _ in files):
        raise ConfigError(
            path,
            f"dbt_model: the dbt project has no model {header.dbt_model!r} (no "
            f"{header.dbt_model}.sql)",
            model.header_line("dbt_model"),
        )
    env, passthrough = job_environment(model, header)
    program = Program(
        kind=ModelKind.DBT,
        entry=(header.dbt_project, header.dbt_model),
        files=files,
        env=env,
        passthrough=passthrough,
        timeout_seconds=header.timeout_seconds,
        revision=_git_commit(folder),
    )
    return model, program


def project_files(root: Path, dbt_project: str) -> Digests:
    """(project-relative path, sha256) of the dbt project's code, sorted."""
    base = root.resolve()
    found = []
    for file in sorted((base / dbt_project).rglob("*")):
        relative = file.relative_to(base / dbt_project)
        if GENERATED & set(relative.parts) or not file.is_file():
            continue
        if file.suffix in CODE_SUFFIXES:
            found.append((file.relative_to(base).as_posix(), digest(file)))
    return tuple(found)


def _git_commit(folder: Path) -> str | None:
    """The newest commit that changed the dbt project's folder (not any commit of its
    repository: those leave its models alone), or None outside a repository."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "log", "-1", "--format=%H", "--", "."],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None
