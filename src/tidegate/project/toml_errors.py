"""Pointing a user at the line of a TOML document that a validation error is about."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from tidegate.domain.checks import CHECK_KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class TOMLDecodeError(ValueError):
    """TOML that does not parse; the message ends in "(at line N, column M)" when it can."""


def loads(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # the end of the document is a place too: its last line
        lines = text.split("\n")
        at_end = f"(at line {len(lines)}, column {len(lines[-1]) + 1})"
        raise TOMLDecodeError(str(error).replace("(at end of document)", at_end)) from None
    except RecursionError:  # tomllib recurses once per level of nested arrays and tables
        lines = text.splitlines() or [""]
        deepest = max(range(len(lines)), key=lambda n: lines[n].count("[") + lines[n].count("{"))
        raise TOMLDecodeError(
            f"arrays or inline tables nested too deeply (at line {deepest + 1}, column 1)"
        ) from None


def decode_line(error: Exception) -> int | None:
    match = re.search(r"line (\d+)", str(error))
    return int(match.group(1)) if match else None


def decode_message(error: Exception) -> str:
    return re.sub(r"\s*\(at line \d+, column \d+\)", "", str(error)).strip()


def line_of_key(text: str, location: Sequence[str | int]) -> int | None:
    """The line where the deepest named key of `location` is written, if it can be found."""
    names = [part for part in location if isinstance(part, str)]
    for name in reversed(names):
        pattern = re.compile(
            rf"^\s*(\[\[?\s*([\w.\"-]*\.)?\"?{re.escape(name)}\"?\s*\]\]?|\"?{re.escape(name)}\"?\s*=)"
        )
        for number, line in enumerate(text.splitlines(), start=1):
            if pattern.search(line):
                return number
    return None


def describe(error: ValidationError) -> tuple[str, tuple[str | int, ...]]:
    """One line for the first problem of a pydantic error, and where it is."""
    first = error.errors()[0]
    location = tuple(first["loc"])
    field = ".".join(str(p) for p in location if not _is_tag(p))
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    elif first["type"] == "missing":
        message = "required key is missing"
    return (f"{field}: {message}" if field else message), location


def _is_tag(part: str | int) -> bool:
    # pydantic names the branch of a tagged union (a check's type) in the location; users
    # never wrote it
    return isinstance(part, str) and part in CHECK_KINDS
