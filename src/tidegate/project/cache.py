"""What loading a project made of its files, kept in `.tidegate/cache/` and reused while those
files are unchanged (by content digest).

- The ledger's readers (`status`, `show`, `history`) take the project's view from it (names,
  order, declarations, the project's name, where the ledger is) instead of validating the
  project file and parsing every model: they start without the SQL parser or pydantic.
- A loading writer reuses each SQL model's declaration while the model's file, the project
  file and the set of model names are unchanged, so a command's cost does not grow with the
  size of model files it did not change. Programs (Python, command and dbt models) depend on
  more than their file (the code they import, installed packages, the dbt project): they are
  read again each time.

`project.json` holds the view, the digests of the files and the models' declarations without
their SQL text (all a reader needs); each SQL model's whole declaration is a file of its own in
`models/`, named after the digests it was made from. A file's digest is taken again only when
its size, times or inode changed since it was taken, as git's index does (a file modified within
RACY_NS of the moment its digest was taken is always read again). The cache is tidegate's own: a
missing, unreadable or foreign one is ignored and written anew; one that cannot be written (a
read-only folder) is not written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidegate.domain.model import ModelSpec
from tidegate.project.code_files import digest as file_digest
from tidegate.project.layout import MODEL_SUFFIXES, MODELS_DIR, PROJECT_FILE
from tidegate.project.view import LedgerPlace, ProjectView

if TYPE_CHECKING:
    from tidegate.project.loader import Project

CACHE_DIR = Path(".tidegate") / "cache"
INDEX_FILE = CACHE_DIR / "project.json"
SPECS_DIR = CACHE_DIR / "models"
FIRES_FILE = CACHE_DIR / "fires.json"
# what a cache written by another format or release of tidegate holds is not reused
FORMAT = 2
# a file changed this soon after its digest was taken may keep its size and times
RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class Inputs:
    """Digests of a project's own files (the project file and every file of `models/`), with
    what each file's stat said when its digest was taken."""

    files: Mapping[str, str]
    stats: Mapping[str, list[int | str]]

    @property
    def digest(self) -> str:
        return _digest([_release(), sorted(self.files.items())])

    @property
    def project_file(self) -> str:
        return self.files[PROJECT_FILE]


def inputs_of(root: Path, stored: Mapping[str, Any] | None = None) -> Inputs | None:
    """The digests of the project's files now (those whose stat is unchanged since `stored`
    took them are not read); None when it has no project file (loading it says why)."""
    known = stored.get("files", {}) if stored else {}
    folder = root / MODELS_DIR
    try:
        names = [PROJECT_FILE] + (
            sorted(
                f"{MODELS_DIR}/{f.name}"
                for f in folder.iterdir()
                if f.suffix in MODEL_SUFFIXES and f.is_file()
            )
            if folder.is_dir()
            else []
        )
        files, stats = {}, {}
        for name in names:
            stats[name] = _stat_of(root / name, known.get(name))
            files[name] = str(stats[name][-2])
    except OSError:
        return None
    return Inputs(files, stats)


def _stat_of(path: Path, known: Any) -> list[int | str]:
    """[size, mtime_ns, ctime_ns, inode, digest, taken_ns] of a file, the digest taken again
    unless `known` says the same of the same file and was taken well after its last change."""
    stat = path.stat()
    now = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
    if (
        isinstance(known, list)
        and len(known) == 6
        and known[:4] == now
        and isinstance(known[5], int)
        and max(stat.st_mtime_ns, stat.st_ctime_ns) + RACY_NS < known[5]
    ):
        return known
    taken = time.time_ns()
    return [*now, file_digest(path), taken]


def stored_cache(root: Path) -> dict[str, Any] | None:
    """The cache's index, when it is one this tidegate wrote."""
    try:
        stored = json.loads((root / INDEX_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("format") != FORMAT:
        return None
    if stored.get("release") != _release():
        return None
    return stored


def read_view(root: Path) -> ProjectView | None:
    """The project's view from the cache, when the project's files (and the code files its
    programs run) are those it was made from; None otherwise."""
    stored = stored_cache(root)
    view = stored.get("view") if stored else None
    if not stored or not isinstance(view, dict):
        return None
    inputs = inputs_of(root, stored)
    if inputs is None or stored.get("inputs") != inputs.digest:
        return None
    from tidegate.state.codec import spec_from_json

    try:
        for path, digest in view["code"]:
            if file_digest(root / path) != digest:
                return None
        declared = {name: spec_from_json(m["declared"]) for name, m in stored["models"].items()}
        return ProjectView(
            root=root,
            name=view["name"],
            tables=view["tables"],
            state=LedgerPlace(**view["state"]),
            order=tuple(view["order"]),
            models={name: declared[name] for name in view["order"]},
        )
    except (OSError, KeyError, TypeError, ValueError):  # a cache that is not one of ours
        return None


def reusable_specs(
    root: Path, stored: Mapping[str, Any] | None, inputs: Inputs | None, names: set[str]
) -> dict[str, ModelSpec]:
    """The cached declarations of SQL models whose file is unchanged, made with the same
    project file and the same set of model names (what a declaration is checked against)."""
    if inputs is None or not stored or stored.get("context") != _context(inputs, names):
        return {}
    from tidegate.state.codec import spec_from_json

    found = {}
    try:
        for name, entry in stored["models"].items():
            if entry["reusable"] and inputs.files.get(entry["file"]) == entry["digest"]:
                text = (root / SPECS_DIR / f"{entry['spec']}.json").read_text()
                found[name] = spec_from_json(text)
    except (OSError, KeyError, TypeError, ValueError):  # a cache that is not one of ours
        return {}
    return found


def remember(project: Project, before: Inputs | None) -> None:
    """Keep what loading `project` made, if its files are still those read before loading it
    (`before`): a file changed meanwhile would be cached under the digest of another."""
    root = project.root
    after = inputs_of(root, {"files": before.stats}) if before is not None else None
    if before is None or after is None or after.files != before.files:
        return
    from tidegate.state.codec import spec_to_json

    context = _context(before, set(project.models))
    models: dict[str, Any] = {}
    specs: dict[str, ModelSpec] = {}
    for name, spec in project.models.items():
        if spec.path not in before.files:  # a dbt project's model
            continue
        reusable = spec.program is None and spec.dbt is None
        key = _digest([context, name, before.files[spec.path]]) if reusable else None
        models[name] = {
            "file": spec.path,
            "digest": before.files[spec.path],
            "declared": spec_to_json(dataclasses.replace(spec, sql="")),
            "reusable": reusable,
            "spec": key,
        }
        if key is not None:
            specs[key] = spec
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
    index = {
        "format": FORMAT,
        "release": _release(),
        "inputs": before.digest,
        "context": context,
        "files": dict(before.stats),
        "view": view,
        "models": models,
    }
    try:
        (root / SPECS_DIR).mkdir(parents=True, exist_ok=True)
        kept = {f.stem for f in (root / SPECS_DIR).iterdir()}
        for key, spec in specs.items():
            if key not in kept:
                _write(root / SPECS_DIR / f"{key}.json", spec_to_json(spec))
        for stale in kept - set(specs):
            (root / SPECS_DIR / f"{stale}.json").unlink(missing_ok=True)
    except OSError:
        return
    _write(root / INDEX_FILE, json.dumps(index, sort_keys=True))


def fire_windows(root: Path) -> dict[str, Any]:
    """The windows of consecutive fires of schedules an earlier command found (see
    domain/schedule.py)."""
    try:
        found = json.loads((root / FIRES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def keep_fire_windows(root: Path, windows: Mapping[str, tuple[int, int]]) -> None:
    if (root / CACHE_DIR).parent.is_dir():
        _write(root / FIRES_FILE, json.dumps(windows, sort_keys=True))


def _context(inputs: Inputs, names: set[str]) -> str:
    return _digest([_release(), inputs.project_file, sorted(names)])


def _write(path: Path, text: str) -> None:
    """`text` into `path` by an atomic rename, unless it holds it already."""
    with contextlib.suppress(OSError):
        if path.read_text() == text:
            return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".json")
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
