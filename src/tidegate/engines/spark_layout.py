"""Where a Spark warehouse keeps its files: every path relative to the warehouse location, a
local folder.

    <location>/catalog.db                       the Iceberg catalog (SQLite, the default)
    <location>/<namespace>/<table>/…            each Iceberg table: metadata/ and data/
    <location>/<source>/                        a source: any Parquet directory
    <location>/_tidegate/fences.sqlite          the leases' fences (beside a SQLite catalog)
    <location>/_tidegate/spark-sql/             Spark SQL's own warehouse directory (unused)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# the retired format's catalog of pointers (tidegate refuses a warehouse that still has one)
RETIRED_CATALOG_FILE = "_tidegate/catalog.sqlite"
FENCES_FILE = "_tidegate/fences.sqlite"
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True)
class Layout:
    """The warehouse location: an absolute local directory (or a file URI)."""

    root: str

    @property
    def local(self) -> Path | None:
        """The local directory, or None for another URI."""
        if self.root.startswith("file://"):
            return Path(self.root.removeprefix("file://"))
        return None if _URI.match(self.root) else Path(self.root)

    def path(self, relative: str) -> str:
        """The path Spark reads and writes for a path relative to the location."""
        return f"{self.root.rstrip('/')}/{relative}"

    def source(self, name: str) -> str:
        return self.path(name)

    def has_source(self, name: str) -> bool | None:
        """Whether a source's directory exists; None when only reading it can tell (a URI)."""
        local = self.local
        return None if local is None else (local / name).is_dir()
