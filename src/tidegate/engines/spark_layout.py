"""Where a Spark warehouse keeps its files: every path relative to the warehouse location.

    <location>/<table>/publish-<attempt id>-<random>/tidegate_slot=<partition start>/*.parquet
    <location>/<schema>/<table>/…                      a table of a schema (validate's shadows)
    <location>/<source>/                               a source: any Parquet directory
    <location>/_tidegate/catalog.sqlite                the default catalog (pointers, markers)

Each publish writes a fresh directory, one subdirectory per partition (its slot: a time
partition's start in epoch seconds, a key's position in the key list), and never touches it
again; which directory holds a partition is the catalog's pointer. A directory no pointer
names is garbage: a lost race, a failed or crashed publish, or a partition's older contents.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tidegate.sql.spark import SLOT_COLUMN

if TYPE_CHECKING:
    from tidegate.engines.spark_views import Views

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

    def publish(self, table: str, schema: str | None, attempt: str) -> str:
        """A fresh directory of one publish (relative), named after its first attempt: never
        one written before. Its partitions are its subdirectories (`slot`)."""
        safe = _UNSAFE.sub("_", attempt)[:80]
        parts = [*([schema] if schema else []), table]
        return "/".join([*parts, f"publish-{safe}-{uuid.uuid4().hex[:12]}"])

    @staticmethod
    def slot(directory: str, start: int) -> str:
        """A partition's directory in a publish's, as Spark's partitioned write names it."""
        return f"{directory}/{SLOT_COLUMN}={start}"

    def present(self, directory: str, starts: Sequence[int], views: Views) -> set[int]:
        """The partitions a publish's write gave a directory (one that got no rows has none)."""
        local = self.local
        if local is None:
            return views.slots_in(self.path(directory))
        return {s for s in starts if (local / self.slot(directory, s)).is_dir()}

    def remove(self, relative: str) -> None:
        """Delete a directory no pointer names (local locations only: on a URI it stays as
        garbage)."""
        local = self.local
        if local is not None:
            shutil.rmtree(local / relative, ignore_errors=True)
