"""The project files a program model runs, by digest: a version runs only the code it was
built from."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from tidegate.domain.errors import ModelError

Digests = tuple[tuple[str, str], ...]
# a command argument's {placeholder}, filled in when the command runs
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
CHUNK = 1 << 20


def digest(file: Path) -> str:
    """sha256 of a file's bytes, read in chunks (a model file may be large)."""
    found = hashlib.sha256()
    with file.open("rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            found.update(chunk)
    return found.hexdigest()


def require_unchanged(built: Digests, current: Digests) -> None:
    """Raise ModelError naming the files that differ from those the version was built from."""
    changed = sorted({path for path, _ in set(current) ^ set(built)})
    if changed:
        raise ModelError(
            f"{', '.join(changed)} changed since this version was built; a version runs only "
            "the code it was built from (restore it, or `tidegate build` and deploy anew)"
        )


def referenced_files(root: Path, command: list[str] | tuple[str, ...]) -> Digests:
    """(path, sha256) of the project files the command's arguments name (its script, say)."""
    base = root.resolve()
    found: dict[str, str] = {}
    for argument in command:
        if PLACEHOLDER.search(argument) or not argument or argument.startswith("-"):
            continue
        candidate = (root / argument).resolve()
        if candidate.is_file() and candidate.is_relative_to(base):
            found[candidate.relative_to(base).as_posix()] = digest(candidate)
    return tuple(sorted(found.items()))
