"""What loading a project made of its files, kept in `.tidegate/cache/project.json` and reused
while those files are unchanged (by content digest, never by modification time).

- The ledger's readers (`status`, `show`, `history`) take the project's view from it (names,
  order, declarations, the project's name, where the ledger is) instead of validating the
  project file and parsing every model: they start without the SQL parser or pydantic.
- A loading writer reuses each SQL model's declaration while the model's file, the project
  file and the set of model names are unchanged, so a command's cost does not grow with the
  size of model files it did not change. Programs (Python, command and dbt models) depend on
  more than their file (the code they import, installed packages, the dbt project): they are
  read again each time.

The cache is tidegate's own: a missing, unreadable or foreign one is ignored and written
anew; one that cannot be written (a read-only folder) is not written.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidegate.domain.model import ModelSpec
from tidegate.project.code_files import digest as file_digest
from tidegate.project.view import LedgerPlace, ProjectView

if TYPE_CHECKING:
    from tidegate.project.loader import Project

CACHE_FILE = Path(".tidegate") / "cache" / "project.json"
PROJECT_FILE = "tidegate.toml"
MODELS_DIR = "models"
MODEL_SUFFIXES = (".sql", ".py", ".toml")
# what a cache written by another format or release of tidegate holds is not reused
FORMAT = 1


@dataclass(frozen=True)
class Inputs:
    """Digests of a project's own files: the project file and every file of `models/`."""

    project_file: str
    files: Mapping[str, str]

    @property
    def digest(self) -> str:
        return _digest([_release(), self.project_file, sorted(self.files.items())])


def inputs_of(root: Path) -> Inputs | None:
    """The digests of the project's files now; None when it has no project file (loading it
    says why)."""
    try:
        project_file = file_digest(root / PROJECT_FILE)
        folder = root / MODELS_DIR
        files = (
            {
                f"{MODELS_DIR}/{f.name}": file_digest(f)
                for f in sorted(folder.iterdir())
                if f.suffix in MODEL_SUFFIXES and f.is_file()
            }
            if folder.is_dir()
            else {}
        )
    except OSError:
        return None
    return Inputs(project_file, files)


def read_view(root: Path) -> ProjectView | None:
    """The project's view from the cache, when the project's files (and the code files its
    programs run) are those it was made from; None otherwise."""
    stored = _stored(root)
    view = stored.get("view") if stored else None
    if not stored or not isinstance(view, dict):
        return None
    inputs = inputs_of(root)
    if inputs is None or stored.get("inputs") != inputs.digest:
        return None
    for path, digest in view["code"]:
        try:
            if file_digest(root / path) != digest:
                return None
        except OSError:
            return None
    from tidegate.state.codec import spec_from_json

    try:
        models = {name: spec_from_json(entry["spec"]) for name, entry in stored["models"].items()}
        return ProjectView(
            root=root,
            name=view["name"],
            tables=view["tables"],
            state=LedgerPlace(**view["state"]),
            order=tuple(view["order"]),
            models={name: models[name] for name in view["order"]},
        )
    except (KeyError, TypeError, ValueError):  # a cache that is not one of ours
        return None


def reusable_specs(root: Path, inputs: Inputs | None, names: set[str]) -> dict[str, ModelSpec]:
    """The cached declarations of SQL models whose file is unchanged, made with the same
    project file and the same set of model names (what a declaration is checked against)."""
    stored = _stored(root)
    if inputs is None or not stored or stored.get("context") != _context(inputs, names):
        return {}
    from tidegate.state.codec import spec_from_json

    found = {}
    try:
        for name, entry in stored["models"].items():
            if entry["reusable"] and inputs.files.get(entry["file"]) == entry["digest"]:
                found[name] = spec_from_json(entry["spec"])
    except (KeyError, TypeError, ValueError):  # a cache that is not one of ours
        return {}
    return found


def remember(project: Project, before: Inputs | None) -> None:
    """Keep what loading `project` made, if its files are still those read before loading it
    (`before`): a file changed meanwhile would be cached under the digest of another."""
    if before is None or inputs_of(project.root) != before:
        return
    from tidegate.state.codec import spec_to_json

    models = {}
    for name, spec in project.models.items():
        if spec.path not in before.files:  # a dbt project's model
            continue
        models[name] = {
            "file": spec.path,
            "digest": before.files[spec.path],
            "spec": spec_to_json(spec),
            "reusable": spec.program is None and spec.dbt is None,
        }
    view = None
    if project.dbt is None:
        state = project.settings.state
        view = {
            "name": project.settings.project.name,
            "tables": project.settings.warehouse.tables,
            "state": {
                "path": state.path,
                "url": state.url,
                "db_schema": state.db_schema,
                "password_env": state.password_env,
            },
            "order": list(project.order),
            # the code a program runs besides its model file: the view is stale once it changes
            "code": sorted(
                {f for spec in project.models.values() if spec.program for f in spec.program.files}
            ),
        }
    document = {
        "format": FORMAT,
        "release": _release(),
        "inputs": before.digest,
        "context": _context(before, set(project.models)),
        "view": view,
        "models": models,
    }
    _write(project.root, json.dumps(document, sort_keys=True))


def _context(inputs: Inputs, names: set[str]) -> str:
    return _digest([_release(), inputs.project_file, sorted(names)])


def _stored(root: Path) -> dict[str, Any] | None:
    try:
        stored = json.loads((root / CACHE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("format") != FORMAT:
        return None
    if stored.get("release") != _release():
        return None
    return stored


def _write(root: Path, text: str) -> None:
    path = root / CACHE_FILE
    with contextlib.suppress(OSError):
        if path.read_text() == text:
            return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".project-", suffix=".json")
    except OSError:
        return
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


@functools.cache
def _release() -> str:
    """tidegate's release and a signature of its own source files (path, size, modification
    time): a cache made by other code than this — an upgrade, a change of a checkout — is not
    reused."""
    from tidegate import __version__

    found = []
    pending = [os.path.dirname(os.path.dirname(__file__))]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                    pending.append(entry.path)
                elif entry.name.endswith(".py"):
                    stat = entry.stat()
                    found.append((entry.path, stat.st_size, stat.st_mtime_ns))
    return _digest([__version__, sorted(found)])


def _digest(parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()
