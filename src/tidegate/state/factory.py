"""Opening the project's state store."""

from __future__ import annotations

from pathlib import Path

from tidegate.state.base import StateStore


def open_state(path: Path) -> StateStore:
    from tidegate.state.sqlite import SQLiteStateStore

    return SQLiteStateStore(path)
