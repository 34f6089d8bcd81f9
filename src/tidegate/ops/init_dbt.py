"""`tidegate init --dbt PATH`: a tidegate.toml for an existing dbt project, its warehouse the
one the profile's target builds into (a DuckDB file, or a PostgreSQL database and schema).
The dbt project is only read."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tidegate.dbt.compiler import default_profiles_dir
from tidegate.domain.errors import UsageError

# `{{ env_var('NAME') }}` or `{{ env_var('NAME', 'default') }}`, the whole value
_ENV_VAR = re.compile(
    r"""^\s*\{\{\s*env_var\(\s*['"](?P<name>\w+)['"]\s*(,\s*['"](?P<default>[^'"]*)['"]\s*)?\)\s*\}\}\s*$"""
)


@dataclass(frozen=True)
class DbtTarget:
    """What tidegate.toml needs of the profile's target."""

    name: str
    warehouse: str  # the [warehouse] section's lines


def dbt_project_file(root: Path, dbt: Path, target: str | None) -> str:
    """tidegate.toml's text for the dbt project at `dbt` (a tidegate project at `root`)."""
    folder = dbt.resolve()
    project_file = folder / "dbt_project.yml"
    if not project_file.is_file():
        raise UsageError(f"--dbt: {dbt} is not a dbt project folder (no dbt_project.yml)")
    project = _yaml(project_file)
    profiles = default_profiles_dir(folder)
    chosen = _target(
        profiles / "profiles.yml", str(project.get("profile") or ""), target, folder, root
    )
    relative = os.path.relpath(folder, root.resolve())
    lines = [
        "[project]",
        f"name = {_string(str(project.get('name') or root.resolve().name))}",
        "",
        "# the dbt project, used as it is: tidegate compiles it with dbt and controls its models",
        "[dbt]",
        f"project = {_string(relative)}",
    ]
    if profiles != Path.home() / ".dbt":
        lines.append(f"profiles_dir = {_string(os.path.relpath(profiles, root.resolve()))}")
    lines += [
        f"target = {_string(chosen.name)}",
        "",
        "# where the target builds: tidegate publishes into the same relations",
        "[warehouse]",
        chosen.warehouse,
        "",
        "[state]",
        'path = ".tidegate/state.db"',
        "",
    ]
    return "\n".join(lines)


def _yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise UsageError(f"--dbt: cannot read {path}: {str(error).splitlines()[0]}") from None
    return data if isinstance(data, dict) else {}


def _target(
    profiles: Path, profile: str, wanted: str | None, folder: Path, root: Path
) -> DbtTarget:
    if not profiles.is_file():
        raise UsageError(f"--dbt: no profiles.yml at {profiles}")
    outputs_of = _yaml(profiles).get(profile)
    if not isinstance(outputs_of, dict) or not isinstance(outputs_of.get("outputs"), dict):
        raise UsageError(f"--dbt: {profiles} has no profile {profile!r} with outputs")
    name = wanted or str(outputs_of.get("target") or "")
    output = outputs_of["outputs"].get(name)
    if not isinstance(output, dict):
        known = ", ".join(sorted(outputs_of["outputs"]))
        raise UsageError(f"--dbt: profile {profile!r} has no target {name!r} (targets: {known})")
    kind = _value(output.get("type"))
    if kind == "duckdb":
        return DbtTarget(name, _duckdb(output, folder, root, name))
    if kind == "postgres":
        return DbtTarget(name, _postgres(output, name))
    raise UsageError(
        f"--dbt: target {name!r} is {kind}; tidegate controls dbt projects on duckdb and postgres"
    )


def _value(raw: object) -> str:
    """A profile value, with a whole-value `env_var()` read from the environment."""
    text = "" if raw is None else str(raw)
    found = _ENV_VAR.match(text)
    if found is None:
        return text
    return os.environ.get(found["name"], found["default"] or "")


def _duckdb(output: dict[str, Any], folder: Path, root: Path, name: str) -> str:
    path = _value(output.get("path"))
    if not path or path == ":memory:" or "{{" in path:
        raise UsageError(
            f"--dbt: target {name!r} keeps no DuckDB file tidegate can find (path "
            f"{output.get('path')!r}); give it a file path"
        )
    # dbt-duckdb opens a relative path from where dbt runs: tidegate runs it in the project
    warehouse = (folder / path).resolve()
    return f'engine = "duckdb"\npath = {_string(os.path.relpath(warehouse, root.resolve()))}'


def _postgres(output: dict[str, Any], name: str) -> str:
    user, host = _value(output.get("user")), _value(output.get("host")) or "localhost"
    port, database = _value(output.get("port")) or "5432", _value(output.get("dbname"))
    schema = _value(output.get("schema")) or "public"
    if not user or not database or "{{" in user + host + database + schema:
        raise UsageError(f"--dbt: target {name!r} lacks a user, host or dbname tidegate can read")
    lines = [
        'engine = "postgres"',
        f"dsn = {_string(f'postgresql://{user}@{host}:{port}/{database}')}",
        f"schema = {_string(schema)}",
    ]
    secret = _ENV_VAR.match(str(output.get("password") or ""))
    if secret is not None:
        variable = secret["name"]
        if secret["default"] != "" or variable in os.environ:
            lines.append(f"password_env = {_string(variable)}")
        else:
            # `env_var('NAME', '')`, NAME unset: dbt connects without a password, and so does
            # tidegate (password_env naming a variable that is not set is refused)
            lines.append(
                f"# password_env = {_string(variable)}  (not set when init ran: no password; "
                "libpq's PGPASSWORD or ~/.pgpass apply)"
            )
    return "\n".join(lines)


def _string(text: str) -> str:
    """A TOML basic string."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
