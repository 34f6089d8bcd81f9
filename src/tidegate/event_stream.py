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
    """JSON lines, each flushed as written (a reader follows the run as it goes)."""

    def __init__(self, target: IO[str], owned: bool) -> None:
        self._target = target
        self._owned = owned

    @classmethod
    def open(cls, events: str | None, path: Path | None) -> EventStream | None:
        """The stream `--events` and `--events-file` ask for: None without either; stderr for
        `--events jsonl` alone; the file (created, or appended to) with `--events-file`."""
        if path is None:
            return None if events is None else cls(sys.stderr, owned=False)
        try:
            return cls(path.open("a", encoding="utf-8"), owned=True)
        except OSError as error:
            raise UsageError(
                f"--events-file {path}: cannot write it: {error.strerror or error}"
            ) from None

    def write(self, event: dict[str, Any]) -> None:
        self._target.write(json.dumps(event, default=str) + "\n")
        self._target.flush()

    def close(self) -> None:
        if self._owned:
            self._target.close()
