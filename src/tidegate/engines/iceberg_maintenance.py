"""Maintenance of tidegate's Iceberg tables (`tidegate maintain`, docs/engines/iceberg.md): the
leftover `tidegate-*` branches removed, the snapshots no one needs any more expired, and the
files no kept snapshot references deleted.

What is kept, and why:

- main's current snapshot (what every reader reads);
- each partition's current snapshot: the newest of main's history whose markers name the
  partition. `verify` reads the partition's marker there, and `restore` reads the attempt's files
  through it;
- main's history from the oldest of those on, unbroken: a snapshot is expired only in a prefix of
  main's history (oldest first), so that walking main's parents from the head still reaches every
  marker that counts;
- every snapshot a branch or tag other than main and `tidegate-*` leads to (another tool's);
- anything younger than the retention (`[warehouse] keep`).

Expiring a snapshot only drops it from the table's metadata (pyiceberg's `expire_snapshots`);
the files go in a second step, the orphans: files under the table's `data/` and `metadata/`
folders that neither a kept snapshot (its manifest list, manifests and live data files) nor the
table's metadata log names, and older than the retention, so that the files of a publish in
flight are never touched (a writer holds the warehouse meanwhile anyway).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pyiceberg.table import Table
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Snapshot, ancestors_of

from tidegate.engines.iceberg_tables import (
    BRANCH_PREFIX,
    IcebergTables,
    _markers_in,
    local_path,
)

# the folders of a table's files, under its location
FOLDERS = ("data", "metadata")


@dataclass(frozen=True)
class Expired:
    """A snapshot expired: its id, when it was committed (epoch milliseconds), the attempts its
    markers named."""

    snapshot_id: int
    committed_at: int
    attempts: tuple[str, ...]


@dataclass(frozen=True)
class Orphan:
    """A file no kept snapshot references: its path under the table's location, and size."""

    path: str
    size: int


@dataclass(frozen=True)
class Maintenance:
    """What maintaining one table removes (or, planned, would remove), and what it keeps."""

    table: str  # namespace.name
    schema: str | None
    name: str
    location: str | None  # the table's local folder; None when its files are not local
    branches: tuple[str, ...]
    snapshots: tuple[Expired, ...]
    files: tuple[Orphan, ...]
    kept: int  # snapshots left

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def empty(self) -> bool:
        return not (self.branches or self.snapshots or self.files)


def plan(tables: IcebergTables, schema: str | None, name: str, before: datetime) -> Maintenance:
    """What maintaining the table removes: its `tidegate-*` branches, the snapshots committed
    before `before` that nothing kept needs, and the files before `before` that no kept snapshot
    references. Changes nothing."""
    table = tables.load(name, schema, fresh=True)
    if table is None:
        raise LookupError(f"no table {name}")
    before_ms = int(before.timestamp() * 1000)
    # one writer (it holds the warehouse): every branch left is a killed publish's; several:
    # one committed before `before` is, a newer one may be another process's publish underway
    branches = tuple(
        sorted(
            name
            for name, ref in table.refs().items()
            if name.startswith(BRANCH_PREFIX)
            and (tables.one_writer or _committed_ms(table, ref.snapshot_id) < before_ms)
        )
    )
    expired = _expired(table, before_ms)
    gone = {e.snapshot_id for e in expired}
    kept = [s for s in table.metadata.snapshots if s.snapshot_id not in gone]
    folder = _folder(table)
    files: tuple[Orphan, ...] = ()
    if folder is not None:
        referenced = _referenced(table, kept)
        files = tuple(_orphans(folder, referenced, before.timestamp()))
    return Maintenance(
        table=".".join(table.name()),
        schema=schema,
        name=name,
        location=str(folder) if folder is not None else None,
        branches=branches,
        snapshots=expired,
        files=files,
        kept=len(kept),
    )


def apply(tables: IcebergTables, planned: Maintenance) -> None:
    """Remove what `plan` found: the branches, then the snapshots (one commit), then the
    files. Another writer may publish meanwhile (Spark's): a publish only supersedes more
    snapshots, and its files are newer than any orphan; the expiry is retried on its commit."""
    if planned.branches:
        tables.remove_branches(planned.name, planned.schema, planned.branches)
    if planned.snapshots:
        tables.expire(planned.name, planned.schema, [e.snapshot_id for e in planned.snapshots])
    if planned.location is None:
        return
    root = Path(planned.location)
    emptied: set[Path] = set()
    for orphan in planned.files:
        path = root / orphan.path
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        emptied.add(path.parent)
    # the partition folders of data/ that held only removed files
    for parent in sorted(emptied, key=lambda p: len(p.parts), reverse=True):
        while parent != root and parent.name not in FOLDERS and _is_empty(parent):
            parent.rmdir()
            parent = parent.parent


def _committed_ms(table: Table, snapshot_id: int) -> int:
    snapshot = table.snapshot_by_id(snapshot_id)
    return 0 if snapshot is None else snapshot.timestamp_ms


def _expired(table: Table, before_ms: int) -> tuple[Expired, ...]:
    metadata = table.metadata
    current = table.current_snapshot()
    main = list(ancestors_of(current, metadata)) if current is not None else []
    # snapshots other refs (a tag, another tool's branch) lead to: never expired
    protected: set[int] = set()
    for ref_name, ref in table.refs().items():
        if ref_name == MAIN_BRANCH or ref_name.startswith(BRANCH_PREFIX):
            continue
        head = metadata.snapshot_by_id(ref.snapshot_id)
        protected |= {s.snapshot_id for s in ancestors_of(head, metadata)}
    # each partition's current snapshot: the newest of main's history naming the partition
    needed: set[int] = set()
    seen: set[int] = set()
    for snapshot in main:  # newest first
        for marker in _markers_in(snapshot):
            if marker.partition_start not in seen:
                seen.add(marker.partition_start)
                needed.add(snapshot.snapshot_id)
    chosen: list[Snapshot] = []
    for snapshot in reversed(main[1:]):  # oldest first, never main's head
        if snapshot.timestamp_ms >= before_ms or snapshot.snapshot_id in needed:
            break
        if snapshot.snapshot_id not in protected:
            chosen.append(snapshot)
    # snapshots off main's history: the heads of dead branches and what led to them
    on_main = {s.snapshot_id for s in main}
    chosen += [
        s
        for s in metadata.snapshots
        if s.snapshot_id not in on_main
        and s.snapshot_id not in protected
        and s.timestamp_ms < before_ms
    ]
    return tuple(
        Expired(
            s.snapshot_id,
            s.timestamp_ms,
            tuple(dict.fromkeys(m.attempt_id for m in _markers_in(s))),
        )
        for s in sorted(chosen, key=lambda s: (s.timestamp_ms, s.snapshot_id))
    )


def _referenced(table: Table, kept: list[Snapshot]) -> set[str]:
    """The local paths of every file the kept snapshots and the metadata name."""
    io = table.io
    metadata = table.metadata
    found = {table.metadata_location, *(e.metadata_file for e in metadata.metadata_log)}
    found |= {s.statistics_path for s in metadata.statistics}
    found |= {s.statistics_path for s in metadata.partition_statistics}
    for snapshot in kept:
        found.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            found.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                found.add(entry.data_file.file_path)
    return {os.path.normpath(local_path(f)) for f in found}


def _orphans(folder: Path, referenced: set[str], before: float) -> Iterator[Orphan]:
    for sub in FOLDERS:
        top = folder / sub
        if not top.is_dir():
            continue
        for directory, _, names in sorted(os.walk(top)):
            for name in sorted(names):
                path = Path(directory) / name
                if os.path.normpath(str(path)) in referenced:
                    continue
                status = path.stat()
                if status.st_mtime >= before:
                    continue
                yield Orphan(str(path.relative_to(folder)), status.st_size)


def _folder(table: Table) -> Path | None:
    location = table.metadata.location
    if location.startswith("file://"):
        return Path(location[len("file://") :])
    return None if "://" in location else Path(location)


def _is_empty(folder: Path) -> bool:
    return folder.is_dir() and not any(folder.iterdir())
