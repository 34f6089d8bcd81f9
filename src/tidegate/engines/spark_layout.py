"""Where a Spark warehouse keeps its files: every path relative to the warehouse location.

    <location>/<table>/<partition column>=<partition>/attempt=<attempt id>-<random>/part-*.parquet
    <location>/<schema>/<table>/…                      a table of a schema (validate's shadows)
    <location>/<source>/                               a source: any Parquet directory
    <location>/_tidegate/catalog.sqlite                the default catalog (pointers, markers)

Each publish writes fresh attempt directories and never touches one again; which directory
holds a partition is the catalog's pointer. A directory no pointer names is garbage: a lost
race, a failed or crashed publish, or a partition's older contents.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from tidegate.domain.partitions import to_utc

CATALOG_FILE = "_tidegate/catalog.sqlite"
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class Layout:
    """The warehouse location: an absolute local directory or a URI Spark can write to."""

    root: str

    @property
    def local(self) -> Path | None:
        """The local directory, or None for a URI (s3a://, hdfs://, …)."""
        if self.root.startswith("file://"):
            return Path(self.root.removeprefix("file://"))
        return None if _URI.match(self.root) else Path(self.root)

    def path(self, relative: str) -> str:
        """The path Spark reads and writes for a path relative to the location."""
        return f"{self.root.rstrip('/')}/{relative}"

    def catalog_file(self) -> Path | None:
        local = self.local
        return None if local is None else local / CATALOG_FILE

    def source(self, name: str) -> str:
        return self.path(name)

    def has_source(self, name: str) -> bool | None:
        """Whether a source's directory exists; None when only reading it can tell (a URI)."""
        local = self.local
        return None if local is None else (local / name).is_dir()

    def attempt(self, table: str, schema: str | None, column: str, label: str, attempt: str) -> str:
        """A fresh attempt directory of one partition (relative): never one written before."""
        safe = _UNSAFE.sub("_", attempt)[:80]
        parts = [*([schema] if schema else []), table, f"{column}={label}"]
        return "/".join([*parts, f"attempt={safe}-{uuid.uuid4().hex[:12]}"])

    def remove(self, relative: str) -> None:
        """Delete a directory no pointer names (local locations only: on a URI it stays as
        garbage)."""
        local = self.local
        if local is not None:
            shutil.rmtree(local / relative, ignore_errors=True)


def time_label(start: int) -> str:
    """A time partition in a directory name: its start in UTC (no `:`, which paths refuse)."""
    return to_utc(start).strftime("%Y-%m-%dT%H%M%SZ")


def key_label(key: str) -> str:
    """A key-list partition in a directory name: a digest of its value (any text)."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:16]
