"""The progress events of a long command (`--events jsonl`): one JSON document per line, on
stderr or in a file (`--events-file`), apart from stdout, where `--json` prints the command's one
result document. A wrapper reads that document whatever the command, and follows the events
if it wants them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Any

from tidegate.domain.errors import UsageError


class EventStream:
    """JSON lines, each flushed as written (a reader follows the run as it goes). A file is
    created at the first event: a command refused before it has any writes nothing."""

    def __init__(self, target: IO[str] | None, path: Path | None = None) -> None:
        self._target = target
        self._path = path

    @classmethod
    def open(cls, events: str | None, path: Path | None) -> EventStream | None:
        """The stream `--events` and `--events-file` ask for: None without either; stderr for
        `--events jsonl` alone; the file (appended to) with `--events-file`, whose folder must
        exist."""
        if path is None:
            return None if events is None else cls(sys.stderr)
        if not path.parent.is_dir():
            raise UsageError(f"--events-file {path}: its folder {path.parent} does not exist")
        return cls(None, path)

    def write(self, event: dict[str, Any]) -> None:
        if self._target is None and self._path is not None:
            self._target = self._path.open("a", encoding="utf-8")
        if self._target is not None:
            self._target.write(json.dumps(event, default=str) + "\n")
            self._target.flush()

    def close(self) -> None:
        if self._path is not None and self._target is not None:
            self._target.close()
