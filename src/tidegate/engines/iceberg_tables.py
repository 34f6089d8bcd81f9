"""Published tables kept as Apache Iceberg tables in a SQL catalog (docs/engines/iceberg.md):
write–audit–publish with Iceberg's own branches, and the commit markers in the snapshots.

A publish writes the window's new rows on a branch of its own (`tidegate-<attempt>`) forked
from main's head, the snapshot's properties carrying the commit markers; the caller audits the
branch's files; then main moves to the branch head by compare-and-swap when main has not moved
since the fork (the catalog refuses the commit otherwise), and the branch goes in the same
commit. When main moved meanwhile and none of the window's files changed, the rows are applied
onto the new main in one commit; when they changed, the publish fails: another writer published
those partitions. A crash leaves at most a branch no reader follows, which the next writer (or
`tidegate maintain`) removes.

Markers are read from main's history: a partition's attempt committed exactly when a snapshot
of main names it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import uuid
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.table import Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot, ancestors_of
from pyiceberg.table.update import update_table_metadata
from pyiceberg.table.update.snapshot import ManageSnapshots

from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError
from tidegate.engines.base import EVERY, CommitMarker
from tidegate.engines.iceberg_types import partition_spec, schema_of, window_filter

# the catalog's name in its database (a reader opening the catalog names it so)
CATALOG_NAME = "tidegate"
BRANCH_PREFIX = "tidegate-"
MARKERS_PROPERTY = "tidegate.markers"
# how often a publish re-reads main and tries again when another writer committed meanwhile
COMMIT_TRIES = 10

MEANWHILE = "was published by another writer meanwhile"
# the table property naming the model an Iceberg table publishes (tables without it are not
# tidegate's: read as sources at most, never published into)
MODEL_PROPERTY = "tidegate.model"


@dataclass(frozen=True)
class Published:
    """What a publish committed: main's snapshot holding the rows, the table's metadata file
    when the publish began, and whether main had moved meanwhile (the rows were applied onto
    another writer's commit)."""

    snapshot_id: int
    began_at: str
    moved: bool


@dataclass(frozen=True)
class DataFiles:
    """Parquet files another engine wrote under the table's folder, one partition per file,
    published as they are (their partition values read from their column statistics)."""

    paths: tuple[str, ...]


@dataclass(frozen=True)
class WrittenFiles:
    """Parquet files written under the table's folder from rows of the table's schema as
    pyiceberg's writer writes them (its Arrow schema, field ids included), one partition per
    file, with each file's footer (pyarrow's FileMetaData): added as they are, their partition
    and statistics read from the footers rather than from the files again."""

    paths: tuple[str, ...]
    footers: tuple[Any, ...]
    # the local folder holding them, which holds nothing else
    folder: str


@dataclass(frozen=True)
class Place:
    """Where the catalog and the files are: a SQLAlchemy URI, the warehouse location (a file
    URI or a path), the namespace of tables without a schema of their own."""

    catalog_uri: str
    location: str
    namespace: str
    # the default catalog's SQLite file (None: a catalog in PostgreSQL)
    catalog_file: Path | None = None


class IcebergTables:
    """A project's published tables in an Iceberg catalog."""

    def __init__(self, place: Place, read_only: bool = False, one_writer: bool = True) -> None:
        self.place = place
        self.read_only = read_only
        # one writing process (DuckDB): what it read stays true until it writes; several
        # (Spark): every read asks the catalog
        self.one_writer = one_writer
        if place.catalog_file is not None:
            place.catalog_file.parent.mkdir(parents=True, exist_ok=True)
        self._catalog = SqlCatalog(
            CATALOG_NAME,
            uri=place.catalog_uri,
            warehouse=place.location,
            init_catalog_tables="true",
        )
        # per table: (main's head, the markers of main's history up to it)
        self._markers: dict[tuple[str, str], tuple[int, list[CommitMarker]]] = {}
        self._loaded: dict[tuple[str, str], Table | None] = {}
        # per manifest file read, its live data files (see _window_files)
        self._entries: dict[str, list[Any]] = {}
        # one publish at a time in this process: each branch forks from main's head, so that
        # moving main is a fast-forward (the handles of worker threads share this object)
        self._publishing = threading.Lock()

    # tables ----------------------------------------------------------------------------------

    def identifier(self, name: str, schema: str | None = None) -> tuple[str, str]:
        """A table's (namespace, name): the project's namespace, or a model's schema nested in
        it (`analytics.marts`), so that projects sharing a catalog never meet."""
        namespace = self.place.namespace
        return (f"{namespace}.{schema}" if schema else namespace, name)

    def load(self, name: str, schema: str | None = None, fresh: bool = False) -> Table | None:
        """The table as this process last read or wrote it (`fresh`, or several writing
        processes: as the catalog holds it now), or None."""
        key = self.identifier(name, schema)
        if fresh or not self.one_writer or key not in self._loaded:
            self._loaded[key] = self._read(key)
        return self._loaded[key]

    def loaded(self, name: str, schema: str | None = None) -> Table | None:
        """The table as this process last read or wrote it, without asking the catalog (None
        when it has not): what another thread may look at while a publish commits."""
        return self._loaded.get(self.identifier(name, schema))

    def _read(self, identifier: tuple[str, str]) -> Table | None:
        try:
            return self._catalog.load_table(identifier)
        except (NoSuchTableError, NoSuchNamespaceError):
            return None
        except OSError as error:
            # the catalog names a metadata file that is gone: the table was damaged outside
            raise EngineError(
                f"iceberg: cannot read table {'.'.join(identifier)}: {_first_line(error)}"
            ) from None

    def metadata_location(self, identifier: tuple[str, str]) -> str | None:
        """The metadata file the catalog names for a table now (None: no such table), in one
        query of the catalog's table: cheaper than loading the table to see whether it
        changed."""
        from sqlalchemy import text

        query = text(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = :catalog "
            "AND table_namespace = :namespace AND table_name = :name"
        )
        namespace, name = identifier
        values = {"catalog": CATALOG_NAME, "namespace": namespace, "name": name}
        with self._catalog.engine.connect() as connection:
            found = connection.execute(query, values).fetchall()
        return str(found[0][0]) if found else None

    def _refresh(self, table: Table) -> None:
        """The table as the catalog holds it now; its metadata file read again only when the
        catalog names another one than the one read (a publish asks several times, and its
        own commits keep the table up to date)."""
        *namespace, name = table.name()
        if self.metadata_location((".".join(namespace), name)) != table.metadata_location:
            table.refresh()

    def load_named(self, identifier: str) -> Table | None:
        """A table of the catalog by its full name (`NAMESPACE.TABLE`, the namespace possibly
        dotted), as the catalog holds it now, or None: a source another tool writes."""
        return self._read(named(identifier))

    def tables(self) -> list[tuple[str | None, str]]:
        """The tables of the catalog in this project's namespace and under its location, as
        (schema, name) (schema None: the namespace itself): a catalog shared with other
        projects and tools lists theirs too, and theirs are never opened. One query of the
        catalog's table (Iceberg's JDBC catalog layout, which pyiceberg's SQL catalog keeps)."""
        from sqlalchemy import text

        root = self.place.location.rstrip("/") + "/"
        query = text(
            "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables "
            "WHERE catalog_name = :catalog"
        )
        with self._catalog.engine.connect() as connection:
            rows = connection.execute(query, {"catalog": CATALOG_NAME}).fetchall()
        found: list[tuple[str | None, str]] = []
        for namespace, name, metadata in rows:
            if not str(metadata).startswith(root):
                continue
            if namespace == self.place.namespace:
                found.append((None, name))
            elif namespace.startswith(self.place.namespace + "."):
                found.append((namespace[len(self.place.namespace) + 1 :], name))
        return sorted(found, key=lambda t: (t[0] or "", t[1]))

    def create(
        self,
        name: str,
        schema: str | None,
        arrow_schema: Any,
        required: Collection[str],
        column: str,
        grain: str | None,
        properties: Mapping[str, str],
    ) -> Table:
        """A new table of these columns (the `required` ones without NULLs), partitioned by the
        grain, with an empty first snapshot on main (a branch forks from a snapshot)."""
        iceberg_schema = schema_of(arrow_schema, required)
        identifier = self.identifier(name, schema)
        with contextlib.suppress(NamespaceAlreadyExistsError):
            self._catalog.create_namespace(identifier[0])
        try:
            table = self._catalog.create_table(
                identifier,
                schema=iceberg_schema,
                partition_spec=partition_spec(iceberg_schema, column, grain),
                properties=dict(properties),
            )
        except TableAlreadyExistsError:
            return self._catalog.load_table(identifier)
        table.append(table.schema().as_arrow().empty_table())
        self._loaded[identifier] = table
        return table

    def drop(self, name: str, schema: str | None = None) -> None:
        """Drop a table a failed first publish created, and its files' metadata from the
        catalog — unless another writer published into it meanwhile or is publishing (main
        moved past its empty first snapshot, or a branch other than main): then it stays."""
        identifier = self.identifier(name, schema)
        table = self._read(identifier)
        if table is not None:
            current = table.current_snapshot()
            untouched = current is not None and current.parent_snapshot_id is None
            if not untouched or set(table.refs()) != {"main"}:
                self._loaded[identifier] = table
                return
        with contextlib.suppress(NoSuchTableError):
            self._catalog.purge_table(identifier)
        self._loaded[identifier] = None

    def evolve(self, table: Table, arrow_schema: Any) -> Table:
        """Add the columns the table lacks (additive changes; nullable)."""
        known = set(table.schema().column_names)
        if known.issuperset(arrow_schema.names):
            return table
        added = [f for f in schema_of(arrow_schema).fields if f.name not in known]
        if added:
            with table.update_schema() as update:
                for field in added:
                    update.add_column(field.name, field.field_type)
        return table

    # publish ---------------------------------------------------------------------------------

    def publish(
        self,
        table: Table,
        rows: Any,
        column: str,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        audit: Callable[[list[str]], None],
        written: Callable[[], None] = lambda: None,
        holding: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> Published:
        """Replace the window's rows of `table` by `rows` (a pyarrow.Table, DataFiles or
        WrittenFiles) with `markers` in the snapshot: written on a branch, `audit` given the
        branch's data files of the window (it raises when they do not hold what was audited;
        the branch is then removed), then main moved to it while `holding` (a lease's fence)
        holds. `written` runs between the audit and the move (a crash point)."""
        if self.read_only:
            raise EngineError("iceberg: this warehouse was opened read-only")
        with self._publishing, warnings.catch_warnings():
            # "Delete operation did not match any records": a first publish of a partition
            warnings.simplefilter("ignore", UserWarning)
            try:
                self._refresh(table)
                began_at = table.metadata_location
                snapshot, moved = self._publish(
                    table, rows, column, bounds, markers, audit, written, holding
                )
            except (OSError, ValueError, CommitFailedException, NoSuchTableError) as error:
                # a file that cannot be written (a full disk), rows the table's schema does not
                # take, a commit the catalog refused, a table another writer's failed first
                # publish dropped: this publish fails, nothing was published
                raise EngineError(
                    f"iceberg: {'.'.join(table.name())}: {_first_line(error)}; nothing was "
                    "published"
                ) from None
            # main holds the rows: what follows only brings this process's view up to date
            with contextlib.suppress(OSError, NoSuchTableError):
                self._refresh(table)
            return Published(snapshot, began_at, moved)

    def _publish(
        self,
        table: Table,
        rows: Any,
        column: str,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        audit: Callable[[list[str]], None],
        written: Callable[[], None],
        holding: Callable[[], AbstractContextManager[None]],
    ) -> tuple[int, bool]:
        self._refuse_published(table, markers)
        window = window_filter(table.schema(), column, bounds)
        properties = _properties(markers)
        base = table.metadata.current_snapshot_id
        if base is None:
            raise EngineError(f"iceberg: table {'.'.join(table.name())} has no snapshot on main")
        branch = BRANCH_PREFIX + (markers[0].attempt_id if markers else f"unmarked-{os.getpid()}")
        if branch in table.refs():
            _snapshots(table).remove_branch(branch).commit()
        try:
            # the branch and its rows in one commit of the catalog
            with _Transaction(table) as transaction:
                ManageSnapshots(transaction).create_branch(base, branch).commit()
                if isinstance(rows, DataFiles):
                    # the markers go on the snapshot adding the files, which is always made
                    transaction.delete(window, branch=branch)
                    transaction.add_files(
                        list(rows.paths),
                        snapshot_properties=properties,
                        branch=branch,
                        check_duplicate_files=False,
                    )
                elif isinstance(rows, WrittenFiles):
                    self._replace(transaction, table, base, branch, window, rows, properties)
                else:
                    transaction.overwrite(
                        rows, overwrite_filter=window, snapshot_properties=properties, branch=branch
                    )
            head = table.refs()[branch].snapshot_id
            audit(self.data_files(table, head, window))
            written()
            with holding():
                moved_to = self._move_main(table, branch, base, head, window, properties)
        except BaseException:
            self._remove_branch(table, branch)
            raise
        # the move removed the branch; one left after a failure to tell is maintain's
        with contextlib.suppress(OSError, CommitFailedException, NoSuchTableError):
            self._remove_branch(table, branch)
        return moved_to

    def _move_main(
        self,
        table: Table,
        branch: str,
        base: int,
        head: int,
        window: Any,
        properties: dict[str, str],
    ) -> tuple[int, bool]:
        """Main moved to the branch head (a fast-forward), or the rows applied onto a main
        that moved: (main's snapshot holding them, whether main had moved)."""
        for _ in range(COMMIT_TRIES):
            self._refresh(table)
            main = table.metadata.current_snapshot_id
            try:
                if main == base:
                    # the fast-forward: the catalog's compare-and-swap refuses it when main
                    # moved after this read
                    _snapshots(table).set_current_snapshot(ref_name=branch).remove_branch(
                        branch
                    ).commit()
                    return head, False
                if main is None or self.data_files(table, main, window) != self.data_files(
                    table, base, window
                ):
                    raise EngineError(
                        f"iceberg: {'.'.join(table.name())}: a partition of this publish "
                        f"{MEANWHILE}; nothing was published"
                    )
                # the branch's audited files, onto the new main in one commit
                audited = self._files(table, head, window)
                with _Transaction(table) as transaction:
                    transaction.delete(window, snapshot_properties=properties)
                    transaction.add_files(
                        audited, snapshot_properties=properties, check_duplicate_files=False
                    )
                current = table.metadata.current_snapshot_id
                if current is None:  # an overwrite always leaves a snapshot
                    raise EngineError("iceberg: the publish left main without a snapshot")
                return current, True
            except CommitFailedException:
                continue
        raise EngineError(
            f"iceberg: {'.'.join(table.name())}: main kept moving; gave up after "
            f"{COMMIT_TRIES} tries, nothing was published"
        )

    def _remove_branch(self, table: Table, branch: str) -> None:
        for _ in range(COMMIT_TRIES):
            self._refresh(table)
            if branch not in table.refs():
                return
            try:
                _snapshots(table).remove_branch(branch).commit()
                return
            except CommitFailedException:
                continue

    def discard_unpublished(self, name: str, schema: str | None, folder: str) -> None:
        """Remove a failed publish's local folder, unless main lists a file of it: the failure
        came after main moved (then, or when main cannot be read, the files stay; `tidegate
        maintain` removes them once no snapshot lists them)."""
        try:
            table = self.load(name, schema, fresh=True)
            listed: list[str] = []
            if table is not None and table.metadata.current_snapshot_id is not None:
                listed = self.data_files(table, table.metadata.current_snapshot_id, AlwaysTrue())
        except (EngineError, OSError):
            return
        prefix = folder.rstrip("/") + "/"
        if not any(path.startswith(prefix) for path in listed):
            shutil.rmtree(folder, ignore_errors=True)

    def refuse_republished(
        self, name: str, schema: str | None, markers: Sequence[CommitMarker]
    ) -> None:
        """Append without a unique key publishes a partition once: one whose marker main's
        history holds is refused."""
        starts = {m.partition_start for m in markers}
        found = {
            m.partition_start
            for m in self.markers_of(name, schema=schema)
            if m.partition_start in starts
        }
        if found:
            raise EngineError(
                f"{name}: append without a unique key publishes a partition once; "
                f"{len(found)} of these partitions are published already, and appending "
                "again would duplicate their rows"
            )

    def _refuse_published(self, table: Table, markers: Sequence[CommitMarker]) -> None:
        ids = {m.attempt_id for m in markers}
        done = sorted(ids & {m.attempt_id for m in self._history(table)})
        if done:
            raise EngineError(f"iceberg: attempt {done[0]} published already")

    def data_files(self, table: Table, snapshot_id: int, window: Any) -> list[str]:
        """The data files of a snapshot that hold rows of the window, as local paths or URIs
        (refused when it has delete files: tidegate writes copy-on-write tables)."""
        return sorted(local_path(f) for f in self._files(table, snapshot_id, window))

    def _replace(
        self,
        transaction: Any,
        table: Table,
        base: int,
        branch: str,
        window: Any,
        written: WrittenFiles,
        properties: dict[str, str],
    ) -> None:
        """On the branch, the window's files replaced by the written ones: in one snapshot when
        every file of the window lies wholly in it (its partition, of the table's spec, is one
        every row of which the window holds), else by a delete (which rewrites a file only
        partly in the window) and an append."""
        from pyiceberg.expressions.visitors import expression_evaluator, strict_projection
        from pyiceberg.schema import Schema

        replaced = self._window_files(table, base, window)
        spec, schema = table.spec(), table.schema()
        within = expression_evaluator(
            Schema(*spec.partition_type(schema).fields),
            strict_projection(schema, spec, True)(window),
            True,
        )
        if all(f.spec_id == spec.spec_id and within(f.partition) for f in replaced):
            producer = transaction.update_snapshot(
                snapshot_properties=properties, branch=branch
            ).overwrite()
            for data_file in replaced:
                producer.delete_data_file(data_file)
        else:
            transaction.delete(window, branch=branch)
            producer = transaction.update_snapshot(
                snapshot_properties=properties, branch=branch
            ).fast_append()
        with producer:
            for data_file in _described(transaction.table_metadata, written):
                producer.append_data_file(data_file)

    def _window_files(self, table: Table, snapshot_id: int, window: Any) -> list[Any]:
        """The data files (pyiceberg's DataFile) of a snapshot whose partition may hold rows of
        the window, by the manifests' partition summaries and each file's partition (refused
        when it has delete files: tidegate writes copy-on-write tables). Manifests never
        change: each is read once, and kept while the last snapshot read lists it."""
        from pyiceberg.expressions.visitors import (
            expression_evaluator,
            inclusive_projection,
            manifest_evaluator,
        )
        from pyiceberg.manifest import ManifestContent
        from pyiceberg.schema import Schema

        metadata = table.metadata
        snapshot = metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise EngineError(f"iceberg: {'.'.join(table.name())} has no snapshot {snapshot_id}")
        schema, specs = metadata.schema(), metadata.specs()
        manifest_filters: dict[int, Any] = {}
        file_filters: dict[int, Any] = {}
        for spec_id, spec in specs.items():
            projected = inclusive_projection(schema, spec)(window)
            manifest_filters[spec_id] = manifest_evaluator(spec, schema, projected)
            partitions = Schema(*spec.partition_type(schema).fields)
            file_filters[spec_id] = expression_evaluator(partitions, projected, True)
        manifests = snapshot.manifests(table.io)
        read = {m.manifest_path: self._entries.get(m.manifest_path) for m in manifests}
        found = []
        for manifest in manifests:
            if not manifest_filters[manifest.partition_spec_id](manifest):
                continue
            entries = read[manifest.manifest_path]
            if entries is None:
                entries = read[manifest.manifest_path] = [
                    e.data_file for e in manifest.fetch_manifest_entry(table.io)
                ]
            matching = [f for f in entries if file_filters[manifest.partition_spec_id](f.partition)]
            if manifest.content != ManifestContent.DATA and matching:
                raise EngineError(
                    f"iceberg: {'.'.join(table.name())} has delete files (merge-on-read); "
                    "tidegate reads copy-on-write tables"
                )
            found.extend(matching)
        self._entries = {path: entries for path, entries in read.items() if entries is not None}
        return found

    def _files(self, table: Table, snapshot_id: int, window: Any) -> list[str]:
        return [f.file_path for f in self._window_files(table, snapshot_id, window)]

    def remove_branches(self, name: str, schema: str | None, branches: Collection[str]) -> None:
        table = self.load(name, schema, fresh=True)
        if table is None:
            return
        for branch in sorted(branches):
            self._remove_branch(table, branch)

    def expire(self, name: str, schema: str | None, snapshot_ids: Sequence[int]) -> None:
        """Expire these snapshots of a table in one commit, tried again when another writer
        committed meanwhile."""
        for _ in range(COMMIT_TRIES):
            table = self.load(name, schema, fresh=True)
            if table is None:
                return
            present = [i for i in snapshot_ids if table.snapshot_by_id(i) is not None]
            if not present:
                return
            try:
                table.maintenance.expire_snapshots().by_ids(present).commit()
                self.load(name, schema, fresh=True)
                return
            except CommitFailedException:
                continue
        raise EngineError(
            f"iceberg: {'.'.join(self.identifier(name, schema))}: kept changing; expired "
            f"nothing after {COMMIT_TRIES} tries"
        )

    def remove_leftover_branches(
        self, tables: Sequence[tuple[str, str]] | None = None
    ) -> list[str]:
        """Remove the `tidegate-*` branches of the tables (default: every table): a publish
        killed before its end left them; no reader follows one. Returns `namespace.table@branch`
        of each removed."""
        removed: list[str] = []
        for schema, name in tables if tables is not None else self.tables():
            table = self.load(name, schema, fresh=True)
            if table is None:
                continue
            for branch in sorted(table.refs()):
                if branch.startswith(BRANCH_PREFIX):
                    self._remove_branch(table, branch)
                    removed.append(f"{'.'.join(table.name())}@{branch}")
        return removed

    # markers ---------------------------------------------------------------------------------

    def markers_of(
        self, name: str, start: int = EVERY[0], end: int = EVERY[1], schema: str | None = None
    ) -> list[CommitMarker]:
        table = self.load(name, schema)
        if table is None:
            return []
        found = [m for m in self._history(table) if start <= m.partition_start < end]
        return sorted(found, key=lambda m: (m.partition_start, m.attempt_id))

    def markers(self, attempt_ids: Sequence[str]) -> dict[str, CommitMarker]:
        wanted = set(attempt_ids)
        found: dict[str, CommitMarker] = {}
        for schema, name in self.tables():
            table = self.load(name, schema)
            if table is None:
                continue
            for marker in self._history(table):
                if marker.attempt_id in wanted:
                    found[marker.attempt_id] = marker
        return found

    def snapshot_of(self, table: Table, attempt_id: str) -> Snapshot | None:
        """Main's snapshot whose markers name the attempt (None: it never published there, or
        its snapshot expired)."""
        for snapshot, markers in self.snapshots_of(table):
            if any(m.attempt_id == attempt_id for m in markers):
                return snapshot
        return None

    def attempt_files(
        self, name: str, schema: str | None, column: str, attempt_id: str, bounds: Mapping[str, Any]
    ) -> list[str]:
        """The data files of a window as main's snapshot naming the attempt lists them (what
        `restore` publishes again); EngineError when no snapshot names it (it never published
        there, or maintenance expired it) or a file of it is gone."""
        table = self.load(name, schema, fresh=True)
        snapshot = None if table is None else self.snapshot_of(table, attempt_id)
        if table is None or snapshot is None:
            raise EngineError(
                f"iceberg: {name} holds no snapshot of attempt {attempt_id} (it never "
                "published there, or `tidegate maintain` expired it)"
            )
        window = window_filter(table.schema(), column, bounds)
        files = self.data_files(table, snapshot.snapshot_id, window)
        gone = [f for f in files if "://" not in f and not Path(f).exists()]
        if gone:
            raise EngineError(
                f"iceberg: the files attempt {attempt_id} wrote are gone ({gone[0]}); "
                f"recompute with `tidegate rerun {name} --partitions …`"
            )
        return files

    def published_in(self, model: str, attempt_id: str) -> dict[str, Any] | None:
        """Where main holds what an attempt of a model (in the project's namespace) published:
        the table, the snapshot id and when it was committed (epoch milliseconds); None when no
        snapshot of main's history names it. Read-only."""
        table = self.load(model)
        snapshot = None if table is None else self.snapshot_of(table, attempt_id)
        if table is None or snapshot is None:
            return None
        return {
            "table": ".".join(table.name()),
            "snapshot_id": snapshot.snapshot_id,
            "committed_at": snapshot.timestamp_ms,
        }

    def snapshots_of(self, table: Table) -> Iterator[tuple[Snapshot, list[CommitMarker]]]:
        """Main's snapshots, newest first, with the markers each names."""
        current = table.current_snapshot()
        if current is None:
            return
        for snapshot in ancestors_of(current, table.metadata):
            yield snapshot, _markers_in(snapshot)

    def _history(self, table: Table) -> list[CommitMarker]:
        """The markers of main's history, newest first; read again only as far back as the
        head last read (a publish adds a snapshot or two to a history of thousands)."""
        key = (table.name()[0], table.name()[-1])
        current = table.current_snapshot()
        cached = self._markers.get(key)
        if current is None:
            return []
        if cached is not None and cached[0] == current.snapshot_id:
            return cached[1]
        newer: list[CommitMarker] = []
        reached = False
        for snapshot in ancestors_of(current, table.metadata):
            if cached is not None and snapshot.snapshot_id == cached[0]:
                reached = True
                break
            newer.extend(_markers_in(snapshot))
        history = newer + (cached[1] if reached and cached is not None else [])
        seen: dict[str, CommitMarker] = {}
        for marker in history:
            seen.setdefault(marker.attempt_id, marker)
        markers = list(seen.values())
        self._markers[key] = (current.snapshot_id, markers)
        return markers

    def close(self) -> None:
        self._catalog.engine.dispose()


class _Transaction(Transaction):
    """pyiceberg's transaction, its metadata with the staged changes made once per change:
    pyiceberg's own makes it again (a deep copy of the table's whole metadata, which grows
    with every snapshot) each time a step of a commit reads it, dozens of times a commit."""

    _made: tuple[TableMetadata, tuple[Any, ...], TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        base, updates = self._table.metadata, self._updates
        made = self._made
        if made is None or made[0] is not base or made[1] is not updates:
            made = self._made = (base, updates, update_table_metadata(base, updates))
        return made[2]


def _snapshots(table: Table) -> ManageSnapshots:
    """table.manage_snapshots(), through a transaction of the kind above."""
    return ManageSnapshots(transaction=_Transaction(table, autocommit=True))


def named(identifier: str) -> tuple[str, str]:
    """A full table name (`NAMESPACE.TABLE`, the namespace possibly dotted) as (namespace,
    name)."""
    namespace, _, name = identifier.rpartition(".")
    return namespace, name


def publish_folder(location: str, markers: Sequence[CommitMarker]) -> str:
    """A fresh folder of one publish's files in the table's at `location` (as it spells it: a
    path or a file URI), named after its first attempt (Iceberg's own writers use data/)."""
    attempt = markers[0].attempt_id if markers else "unmarked"
    return f"{location.rstrip('/')}/data/tidegate-{attempt}-{uuid.uuid4().hex[:12]}"


def refuse_incomplete(markers: Sequence[CommitMarker]) -> None:
    """Every field of a marker is set: one missing would be found only after the data moved."""
    for marker in markers:
        missing = [k for k, v in marker.__dict__.items() if v is None]
        if missing:
            raise EngineError(
                f"iceberg: the marker of attempt {marker.attempt_id} lacks {missing[0]}; "
                "nothing was published"
            )


def tables_folder(location: str) -> str | None:
    """The local folder of a location (a path or a file URI); None for other URIs."""
    if location.startswith("file://"):
        return location[len("file://") :]
    return None if "://" in location else location


# what every marker of one publish shares, written once per snapshot
_SHARED = ("model", "grain", "run_id", "version_id", "published_at")
_OWN = ("attempt_id", "partition_start", "partition_end", "checksum")


def _properties(markers: Sequence[CommitMarker]) -> dict[str, str]:
    """The snapshot's properties: the markers (what they share once, then per partition its
    attempt, bounds and checksum), and what a person reading the history wants."""
    groups: dict[tuple[Any, ...], list[list[Any]]] = {}
    for m in markers:
        groups.setdefault(tuple(getattr(m, k) for k in _SHARED), []).append(
            [getattr(m, k) for k in _OWN]
        )
    properties = {
        MARKERS_PROPERTY: json.dumps(
            [{"shared": list(shared), "partitions": own} for shared, own in groups.items()],
            separators=(",", ":"),
        )
    }
    if markers:
        properties["tidegate.model"] = markers[0].model
        properties["tidegate.run"] = markers[0].run_id
        properties["tidegate.version"] = markers[0].version_id
        properties["tidegate.attempts"] = ",".join(m.attempt_id for m in markers)
        properties["tidegate.rows"] = str(sum(Checksum.parse(m.checksum).rows for m in markers))
    return properties


def _markers_in(snapshot: Snapshot) -> list[CommitMarker]:
    text = (
        snapshot.summary.additional_properties.get(MARKERS_PROPERTY) if snapshot.summary else None
    )
    if not text:
        return []
    found = []
    for group in json.loads(text):
        shared = dict(zip(_SHARED, group["shared"], strict=True))
        for own in group["partitions"]:
            found.append(CommitMarker(**shared, **dict(zip(_OWN, own, strict=True))))
    return found


def _described(metadata: Any, written: WrittenFiles) -> Iterator[Any]:
    """The data files of written files, from their footers: their statistics as the table's
    properties ask for them, and the partition each one's statistics give (a file holding
    two partitions is refused: ValueError)."""
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    schema, spec = metadata.schema(), metadata.spec()
    plan = compute_statistics_plan(schema, metadata.properties)
    mapping = parquet_path_to_id_mapping(schema)
    for path, footer in zip(written.paths, written.footers, strict=True):
        statistics = data_file_statistics_from_parquet_metadata(
            parquet_metadata=footer, stats_columns=plan, parquet_column_mapping=mapping
        )
        yield DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=path,
            file_format=FileFormat.PARQUET,
            partition=statistics.partition(spec, schema),
            file_size_in_bytes=os.path.getsize(local_path(path)),
            sort_order_id=None,
            spec_id=metadata.default_spec_id,
            equality_ids=None,
            key_metadata=None,
            **statistics.to_serialized_dict(),
        )


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def local_path(uri: str) -> str:
    """A file URI as the local path DuckDB reads; other URIs as they are."""
    return uri[len("file://") :] if uri.startswith("file://") else uri
