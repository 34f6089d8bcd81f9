"""Compiling a dbt project with dbt, as it is: `dbt compile --full-refresh`, its artifacts
under `.tidegate/dbt/` (never in the dbt project's folder), once per state of the files and
settings that decide what dbt compiles; every other command reads the cached manifest.

The dbt that compiles: the virtual environment `TIDEGATE_DBT_VENV` names when set; else the
dbt installed beside tidegate (the same Python); else `dbt` on the PATH; else tidegate's own,
installed on first use into `.tidegate/dbt-venv`."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tidegate.domain.errors import ConfigError
from tidegate.execution.dbt import VENV_VARIABLE, dbt_executable
from tidegate.project.config import DbtSection
from tidegate.project.layout import PROJECT_FILE

ARTIFACTS = Path(".tidegate") / "dbt"
# what dbt writes into a project's folder, and installed packages' own artifacts: not code
_GENERATED = frozenset({"target", "logs", ".user.yml"})
# the project's files dbt reads beside its code folders
_TOP_LEVEL = ("dbt_project.yml", "packages.yml", "dependencies.yml", "selectors.yml")
# dbt_project.yml's keys naming the folders of what dbt compiles, with dbt's defaults
_CODE_PATHS: dict[str, str | list[str]] = {
    "model-paths": ["models"],
    "macro-paths": ["macros"],
    "seed-paths": ["seeds"],
    "test-paths": ["tests"],
    "snapshot-paths": ["snapshots"],
    "analysis-paths": ["analyses"],
    "docs-paths": [],
    "packages-install-path": "dbt_packages",
}
_ENV_VAR = re.compile(r"""env_var\(\s*['"]([A-Za-z_][A-Za-z0-9_]*)['"]""")
_LOG_TIME = re.compile(r"^\d\d:\d\d:\d\d(\.\d+)?\s+")
COMPILE_TIMEOUT_SECONDS = 1800


@dataclass(frozen=True)
class Compiled:
    manifest: dict[str, Any]
    adapter_version: str  # the adapter's type and version, as the Python running dbt has it


def compiled(root: Path, section: DbtSection, redact: Callable[[str], str]) -> Compiled:
    """The project's manifest as dbt compiles it now: from the cache when nothing that decides
    it changed, else compiled anew (one compile at a time per project)."""
    # absolute: dbt runs in the dbt project's folder, and must not write its artifacts there
    root = root.resolve()
    folder = dbt_folder(root, section)
    profiles = profiles_dir(root, section, folder)
    key = cache_key(folder, profiles, section)
    artifacts = root / ARTIFACTS
    artifacts.mkdir(parents=True, exist_ok=True)
    record = artifacts / "compiled.json"
    manifest = artifacts / "target" / "manifest.json"
    with (artifacts / "compile.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        known = _read_json(record)
        if known is None or known.get("key") != key or not manifest.is_file():
            versions = _compile(root, section, folder, profiles, artifacts, redact)
            known = {"key": key, **versions}
            temporary = record.with_suffix(".tmp")
            temporary.write_text(json.dumps(known, sort_keys=True))
            os.replace(temporary, record)
        data = _read_json(manifest)
    if data is None:
        raise ConfigError(PROJECT_FILE, f"dbt wrote no readable manifest at {manifest}")
    return Compiled(data, str(known["adapter"]))


def dbt_folder(root: Path, section: DbtSection) -> Path:
    folder = (root / section.project).resolve()
    if not (folder / "dbt_project.yml").is_file():
        raise ConfigError(
            PROJECT_FILE,
            f"dbt.project: {section.project!r} is not a dbt project folder (no dbt_project.yml)",
        )
    return folder


def profiles_dir(root: Path, section: DbtSection, folder: Path) -> Path:
    """Where dbt finds profiles.yml: as configured, `DBT_PROFILES_DIR`, the project folder
    when it holds one, then `~/.dbt` (dbt's own order)."""
    if section.profiles_dir is not None:
        found = (root / section.profiles_dir).resolve()
        if not (found / "profiles.yml").is_file():
            raise ConfigError(
                PROJECT_FILE, f"dbt.profiles_dir: no profiles.yml in {section.profiles_dir!r}"
            )
        return found
    return default_profiles_dir(folder)


def default_profiles_dir(folder: Path) -> Path:
    """Where dbt itself looks for profiles.yml of the project in `folder`."""
    if os.environ.get("DBT_PROFILES_DIR"):
        return Path(os.environ["DBT_PROFILES_DIR"]).resolve()
    if (folder / "profiles.yml").is_file():
        return folder
    return Path.home() / ".dbt"


def _files(folder: Path) -> Iterator[Path]:
    """The files dbt reads to compile the project: its top-level YAML and everything under the
    folders dbt_project.yml names (or their defaults) — not a warehouse file, a virtual
    environment or tidegate's own files that may lie in the same folder."""
    for name in _TOP_LEVEL:
        if (folder / name).is_file():
            yield folder / name
    for path in sorted(_code_paths(folder)):
        base = folder / path
        if not base.resolve().is_relative_to(folder) or not base.is_dir():
            continue
        for file in sorted(base.rglob("*")):
            if file.is_file() and not _GENERATED & set(file.relative_to(folder).parts):
                yield file


def _code_paths(folder: Path) -> set[str]:
    try:
        project = yaml.safe_load((folder / "dbt_project.yml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        project = {}
    found = set()
    for key, default in _CODE_PATHS.items():
        value = project.get(key, default) if isinstance(project, dict) else default
        for path in [value] if isinstance(value, str) else value or []:
            if isinstance(path, str) and not path.startswith("{{"):
                found.add(path)
    return found


def cache_key(folder: Path, profiles: Path, section: DbtSection) -> str:
    """A digest of what decides the compiled project: its files (installed packages too), the
    profile, the target, which dbt, and the values of the variables its files read through
    `env_var()` (digested: they may be secrets)."""
    digest = hashlib.sha256()
    files = [*_files(folder), profiles / "profiles.yml"]
    names: set[str] = set()
    for file in files:
        try:
            content = file.read_bytes()
        except OSError:
            content = b""
        # relative: a copy of the project elsewhere compiles to the same models
        digest.update(f"{os.path.relpath(file, folder)}\0{len(content)}\0".encode())
        digest.update(content)
        names.update(_ENV_VAR.findall(content.decode("utf-8", "replace")))
    for name in sorted({*names, VENV_VARIABLE, "DBT_PROFILES_DIR", "DBT_TARGET_PATH"}):
        value = os.environ.get(name)
        digest.update(
            f"{name}={hashlib.sha256(value.encode()).hexdigest() if value else ''}\0".encode()
        )
    digest.update(f"target={section.target}".encode())
    return digest.hexdigest()


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def dbt_command(root: Path) -> tuple[list[str], str]:
    """How to run dbt, and the Python it runs in (to read the installed versions)."""
    if os.environ.get(VENV_VARIABLE):
        dbt = dbt_executable(root)
        return [str(dbt)], str(dbt.parent / "python")
    if importlib.util.find_spec("dbt") is not None and _has_dbt_cli():
        return [sys.executable, "-c", "from dbt.cli.main import cli; cli()"], sys.executable
    on_path = shutil.which("dbt")
    if on_path is not None:
        return [on_path], _interpreter(Path(on_path))
    dbt = dbt_executable(root)
    return [str(dbt)], str(dbt.parent / "python")


def _has_dbt_cli() -> bool:
    try:
        return importlib.util.find_spec("dbt.cli.main") is not None
    except (ImportError, ValueError):
        return False


def _interpreter(script: Path) -> str:
    """The Python a console script runs in: its venv's, or its shebang's."""
    beside = script.resolve().parent / "python"
    if beside.exists():
        return str(beside)
    first = script.read_bytes()[:200].split(b"\n", 1)[0]
    return first[2:].decode().strip() if first.startswith(b"#!") else sys.executable


def _compile(
    root: Path,
    section: DbtSection,
    folder: Path,
    profiles: Path,
    artifacts: Path,
    redact: Callable[[str], str],
) -> dict[str, str]:
    command, python = dbt_command(root)
    arguments = [
        *command,
        "compile",
        "--full-refresh",
        "--project-dir",
        str(folder),
        "--profiles-dir",
        str(profiles),
        "--target-path",
        str(artifacts / "target"),
        "--log-path",
        str(artifacts / "logs"),
        *(["--target", section.target] if section.target else []),
    ]
    environment = {
        **os.environ,
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DBT_USE_COLORS": "false",
    }
    try:
        done = subprocess.run(
            arguments,
            cwd=folder,
            env=environment,
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT_SECONDS,
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise ConfigError(PROJECT_FILE, f"dbt compile could not run: {error}") from None
    output = redact(done.stdout + done.stderr)
    log = artifacts / "compile.log"
    log.write_text(output)
    if done.returncode != 0:
        raise ConfigError(
            PROJECT_FILE,
            f"dbt compile failed: {first_error(output)} "
            f"(dbt's whole output: {log.relative_to(root)})",
        )
    return {"dbt": "", "adapter": "", **_versions(python, folder, artifacts)}


def first_error(output: str) -> str:
    """dbt's message of what failed, on one line: the line naming the error (and the node and
    file) and the lines that follow it."""
    lines = [_LOG_TIME.sub("", line).strip() for line in output.splitlines()]
    lines = [line for line in lines if line]
    for index, line in enumerate(lines):
        if "Error" in line or "error" in line.split(":", 1)[0]:
            return " ".join(lines[index : index + 3])
    return lines[-1] if lines else "no output"


def _versions(python: str, folder: Path, artifacts: Path) -> dict[str, str]:
    """dbt-core's version and the adapter's (type and version) that compiled the project."""
    manifest = _read_json(artifacts / "target" / "manifest.json") or {}
    metadata = manifest.get("metadata", {})
    adapter = str(metadata.get("adapter_type", "unknown"))
    program = (
        "import importlib.metadata as m, sys\n"
        "for name in sys.argv[1:]:\n"
        "    try: print(m.version(name))\n"
        "    except m.PackageNotFoundError: print('unknown')\n"
    )
    try:
        done = subprocess.run(
            [python, "-c", program, "dbt-core", f"dbt-{adapter}"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=60,
        )
        core, plugin = [*done.stdout.split(), "unknown", "unknown"][:2]
    except (OSError, subprocess.SubprocessError):
        core, plugin = str(metadata.get("dbt_version", "unknown")), "unknown"
    return {"dbt": core, "adapter": f"{adapter} {plugin}"}
