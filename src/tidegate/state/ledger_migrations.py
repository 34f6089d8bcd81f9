"""Numbered migration scripts, as both ledgers ship them (migrations/, migrations_postgres/)."""

from __future__ import annotations

from importlib import resources


def numbered_scripts(folder: str) -> list[tuple[int, str]]:
    """The `NNNN_name.sql` scripts of `folder` in tidegate.state, by number, in order."""
    found = [
        (int(entry.name.split("_", 1)[0]), entry.read_text())
        for entry in (resources.files("tidegate.state") / folder).iterdir()
        if entry.name.endswith(".sql")
    ]
    return sorted(found)
