"""Reading a project's own files as text: a file that is too large or not text is refused with
the file (and the line) named, before any parser sees it."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

from tidegate.domain.errors import ConfigError

LIMIT_KEY = "[limits] model_file_bytes"
# tidegate.toml sets the limit of model files, so its own is fixed: it holds settings, and a
# megabyte of them is already far more than a project needs
PROJECT_FILE_BYTES = 1_000_000


def check_model_size(file: Path, shown: str, limit: int) -> None:
    """Refuse a model file larger than `limit` bytes before it is read: parsing a model takes
    seconds and hundreds of megabytes per megabyte of SQL, on every command."""
    _check_size(file, shown, "model file", limit, f"raise {LIMIT_KEY} in tidegate.toml")


def check_project_file_size(file: Path, shown: str) -> None:
    _check_size(
        file,
        shown,
        "the project file",
        PROJECT_FILE_BYTES,
        "it holds settings; keep data in the warehouse",
    )


def _check_size(file: Path, shown: str, what: str, limit: int, advice: str) -> None:
    size = file.stat().st_size
    if size > limit:
        raise ConfigError(
            shown, f"{what} is {size:,} bytes, larger than the limit of {limit:,} ({advice})"
        )


def read_text(file: Path, shown: str) -> str:
    """The file's text, UTF-8, with universal newlines (as Path.read_text reads it)."""
    data = file.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _not_text(data, error, shown) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_python(file: Path, shown: str) -> str:
    """A Python module's text, decoded as Python decodes it (UTF-8 unless a coding comment
    says otherwise)."""
    data = file.read_bytes()
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:  # a coding comment naming no known encoding, or no UTF-8 in line 1-2
        encoding = "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        raise _not_text(data, error, shown, encoding) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _not_text(
    data: bytes, error: UnicodeDecodeError, shown: str, encoding: str = "utf-8"
) -> ConfigError:
    line_start = data.rfind(b"\n", 0, error.start) + 1
    named = "UTF-8" if encoding.startswith("utf-8") else encoding
    return ConfigError(
        shown,
        f"is not {named} text: byte 0x{data[error.start]:02x} at column "
        f"{error.start - line_start + 1}",
        data.count(b"\n", 0, error.start) + 1,
    )


def relative_path(root: Path, file: Path) -> str:
    return file.relative_to(root).as_posix()
