"""Models, sources, contracts and checks as pure values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from tidegate.domain.cursor import CursorSpec
from tidegate.domain.partitions import (
    WHOLE_TABLE,
    Grain,
    PartitionKey,
    PartitionRange,
    floor,
    parse_partition,
    parse_range,
)
from tidegate.domain.schedule import last_fire
from tidegate.domain.stream import StreamSpec


def _back(grain: Grain, end: int, count: int) -> int:
    """The start of the `count`-th partition before `end`."""
    start = end
    for _ in range(count):
        start = floor(grain, start - 1)
    return start


class WriteMode(str, Enum):
    """How publishing a partition treats the rows it already holds."""

    OVERWRITE = "overwrite"  # replaced whole by the staged rows
    MERGE = "merge"  # upserted by the unique key: staged keys replace theirs, others stay
    APPEND = "append"  # staged rows added; with a unique key, keys already there are skipped
    # columns of an existing table recomputed in place, a key range per transaction
    UPDATE = "update"


class Severity(str, Enum):
    BLOCKING = "blocking"
    WARN = "warn"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool = True

    def declaration(self) -> str:
        return self.type if self.nullable else f"{self.type} NOT NULL"


@dataclass(frozen=True)
class CheckSpec:
    """A declared check. `params` holds the kind-specific settings (columns, values, bounds)."""

    name: str
    kind: str
    severity: Severity
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reconciliation:
    """An aggregate of the input (a source or upstream model) that must equal an aggregate of
    the output, per partition, within `tolerance`."""

    name: str
    source: str
    source_expression: str
    target_expression: str
    tolerance: str = "0"


@dataclass(frozen=True)
class SourceFiles:
    """Where a file source's rows are: an absolute path or glob, and the files' format."""

    path: str
    format: str  # parquet | csv | json
    # the path as tidegate.toml spells it (relative to the project): a version's fingerprint
    # holds it, so that moving the project does not change every model that reads files
    declared: str = ""

    @property
    def folder(self) -> str:
        """The deepest folder holding every file the path names (the one the warehouse may
        read), with a trailing separator."""
        head = self.path
        for mark in ("*", "?", "["):
            head = head.split(mark)[0]
        return head.rsplit("/", 1)[0] + "/"


@dataclass(frozen=True)
class Source:
    """An external table that tidegate reads and never writes (with `files`, a view tidegate
    keeps over Parquet, CSV or JSON files; with `iceberg`, a view it keeps over the files of an
    Iceberg table of the warehouse's catalog). With no `time_column` (a dbt source without an
    event time) every partition reads it whole."""

    name: str
    table: str
    time_column: str
    min_rows: int = 1  # fewer rows in a partition's window: the partition is skipped
    files: SourceFiles | None = None
    iceberg: str | None = None  # NAMESPACE.TABLE in the warehouse's Iceberg catalog


@dataclass(frozen=True)
class UpdateSpec:
    """What an update model does to an existing table: per key range, each column set to an
    SQL expression over the row's own columns (project dialect), evaluated on the current row
    under its lock, so a value the application wrote meanwhile is never overwritten with one
    computed earlier."""

    table: str
    assignments: tuple[tuple[str, str], ...]  # (column, expression)
    # seconds a statement of a range's transaction may wait for one lock, and may run (None:
    # the warehouse's own setting)
    lock_timeout: float | None = None
    statement_timeout: float | None = None

    def config(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "set": [list(a) for a in self.assignments],
            "lock_timeout": self.lock_timeout,
            "statement_timeout": self.statement_timeout,
        }

    @staticmethod
    def from_config(data: Mapping[str, Any]) -> UpdateSpec:
        return UpdateSpec(
            data["table"],
            tuple((column, expression) for column, expression in data["set"]),
            data["lock_timeout"],
            data["statement_timeout"],
        )


@dataclass(frozen=True)
class DbtOrigin:
    """The dbt node a model was compiled from, and what computed it: its fingerprint holds the
    node's and its macros' checksums and the dbt versions, so an edit to another node of the
    dbt project leaves this model's version as it is."""

    node_id: str
    checksum: str  # dbt's checksum of the node's file
    # (macro id, sha256 of its SQL) of every macro the node calls
    macros: tuple[tuple[str, str], ...]
    dbt_version: str
    adapter: str  # the adapter's type and version ("duckdb 1.11.1")

    def config(self) -> dict[str, Any]:
        return {
            "node": self.node_id,
            "checksum": self.checksum,
            "macros": [list(m) for m in self.macros],
            "dbt": self.dbt_version,
            "adapter": self.adapter,
        }


class ModelKind(str, Enum):
    """What computes a model's rows."""

    SQL = "sql"  # one SELECT, run by the warehouse
    PYTHON = "python"  # a decorated function returning Arrow rows or a data frame
    COMMAND = "command"  # an external job writing Parquet files for tidegate to stage
    DBT = "dbt"  # a model of a dbt project, run by tidegate's dbt into Parquet files
    FLINK = "flink"  # a Flink stream job, released by savepoint (domain/stream.py)


@dataclass(frozen=True)
class Program:
    """What runs a model that is not one SELECT (a Python function, an external command or a
    dbt model), with the digest of every project file it runs: a version executes only while
    that code is unchanged, so an old version can never run different code under its name."""

    kind: ModelKind
    # the function's name (python), the argument list with {placeholders} (command), or the
    # dbt project's folder and the model (dbt)
    entry: tuple[str, ...]
    # (project-relative path, sha256) of the files the model runs
    files: tuple[tuple[str, str], ...] = ()
    # (package, version) declared by a Python model
    packages: tuple[tuple[str, str], ...] = ()
    # (name, value) of a command's environment; values may hold ${VARIABLE} references
    env: tuple[tuple[str, str], ...] = ()
    # the variables of tidegate's environment the job gets as they are, when set
    passthrough: tuple[str, ...] = ()
    timeout_seconds: float | None = None
    # the commit of the repository holding the code, when it is in one (dbt)
    revision: str | None = None

    def config(self) -> dict[str, Any]:
        """What takes part in the fingerprint: the code and how it is invoked; the values of
        the environment stay out (they may be secrets, and differ between machines)."""
        return {
            "kind": self.kind.value,
            "entry": list(self.entry),
            "files": [list(f) for f in self.files],
            "packages": [list(p) for p in self.packages],
            "env": [name for name, _ in self.env],
            # which variables the job reads decides what it computes; their values stay out
            # (absent when there are none: fingerprints from before the list existed hold)
            **({"env_passthrough": list(self.passthrough)} if self.passthrough else {}),
            **({"revision": self.revision} if self.revision else {}),
        }


@dataclass(frozen=True)
class ModelSpec:
    """A model as declared in its file: what the Build stage snapshots into a version."""

    name: str
    path: str
    sql: str
    grain: Grain
    partition_column: str
    columns: tuple[Column, ...]
    start: str | None = None
    keys: tuple[str, ...] = ()
    write_mode: WriteMode = WriteMode.OVERWRITE
    unique_key: tuple[str, ...] = ()
    schedule: str | None = None
    # (column, ISO date): kept for readers until that date, removable after it
    deprecated: tuple[tuple[str, str], ...] = ()
    checks: tuple[CheckSpec, ...] = ()
    upstream: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    reconciliations: tuple[Reconciliation, ...] = ()
    # None: an SQL model (`sql` is its SELECT)
    program: Program | None = None
    # a key range's chunk size (grain "range"); 0 for the other grains
    chunk_size: int = 0
    # an update model's table and assignments (write mode "update"; `sql` then shows the
    # SELECT of the values it sets)
    update: UpdateSpec | None = None
    # a cursor model's cursor (grain "cursor")
    cursor: CursorSpec | None = None
    # a key-list model's (source, column holding its keys) pairs
    key_sources: tuple[tuple[str, str], ...] = ()
    # the rows each of its partitions must hold for a downstream model to read it; None:
    # inherited, the smallest min_rows of the sources and models it reads (completeness.py)
    min_rows: int | None = None
    # a model of a dbt project: the node its SQL was compiled from
    dbt: DbtOrigin | None = None
    # upstream models and sources a partitioned model reads whole, though they have a time
    # column (what an inlined dbt ephemeral model reads): each partition reads all their rows
    whole_reads: tuple[str, ...] = ()
    # a Flink model's job, checkpoint location, credentials and output
    stream: StreamSpec | None = None

    @property
    def kind(self) -> ModelKind:
        return ModelKind.SQL if self.program is None else self.program.kind

    def key_column_in(self, source: str) -> str | None:
        """The column of `source` holding this key-list model's keys (None: it reads all the
        source's rows)."""
        return dict(self.key_sources).get(source)

    def first_partition(self) -> PartitionKey | None:
        if self.grain is Grain.TABLE:
            return WHOLE_TABLE
        if self.start is None:
            return None
        return parse_partition(self.start, self.grain, self.keys, self.chunk_size)

    def all_partitions_until(self, end: int) -> PartitionRange:
        if self.grain is Grain.TABLE:
            # a whole table's one partition is complete at any time
            return self.span(WHOLE_TABLE.start, WHOLE_TABLE.end)
        first = self.first_partition()
        begin = first.start if first else end
        return PartitionRange(self.grain, begin, max(begin, end), self.chunk_size)

    def span(self, start: int, end: int) -> PartitionRange:
        """The model's partitions in [start, end) of its bounds."""
        return PartitionRange(self.grain, start, end, self.chunk_size)

    def parse_range(self, text: str) -> PartitionRange:
        """`START..END`, one partition or `all` (key lists) in the model's partitioning."""
        return parse_range(text, self.grain, self.keys, self.chunk_size)

    def parse_partition(self, text: str) -> PartitionKey:
        return parse_partition(text, self.grain, self.keys, self.chunk_size)

    @property
    def published_table(self) -> str:
        """The warehouse table holding what the model published: its own, or the existing
        table an update model writes in place."""
        return self.update.table if self.update is not None else self.name

    @property
    def single_unit(self) -> bool:
        """Whether each partition is computed, audited and published alone, with no time
        buckets: a key of a key list, or a cursor model's interval."""
        return bool(self.keys) or self.cursor is not None

    @property
    def keyed_write(self) -> bool:
        """Whether publishing matches rows by the unique key (merge, or append with a key):
        the staged rows must then hold each key once."""
        return self.write_mode is not WriteMode.OVERWRITE and bool(self.unique_key)

    @property
    def duplicates_on_republish(self) -> bool:
        """Whether publishing a partition again would add its rows twice (append without a
        unique key): such a partition is published once, never again."""
        return self.write_mode is WriteMode.APPEND and not self.unique_key

    @property
    def judged_against_previous(self) -> bool:
        """Whether a check compares a partition with the one before it as published: its
        batches must then publish one after another, not in parallel."""
        return any(c.params.get("relative_to") == "previous" for c in self.checks)

    def due(self, now: int, newest_written: int | None, limit: int) -> PartitionRange:
        """What a scheduler tick at `now` runs: the partitions due by now (see
        domain/schedule.py) after `newest_written` (the end of the newest partition the active
        version published), at most the newest `limit` of them; only the newest one when the
        active version has published nothing (older history is a backfill's job)."""
        if not self.grain.is_time:
            # key lists and key ranges run on request; a cursor model runs past its cursor
            return PartitionRange(self.grain, 0, 0, self.chunk_size)
        end = floor(self.grain, last_fire(self.schedule, now))
        full = self.all_partitions_until(end)
        if len(full) == 0:
            return full
        newest = floor(self.grain, end - 1)
        start = newest if newest_written is None else max(full.start, newest_written)
        if start >= end:
            return PartitionRange(self.grain, end, end)
        return PartitionRange(self.grain, max(start, _back(self.grain, end, limit)), end)

    def whole_table_due(self, now: int, published_at: int | None) -> bool:
        """Whether a scheduler tick at `now` republishes a whole-table model that the active
        version last published at `published_at` (None: it has not): when it has not, or when
        the schedule fired since. Without a schedule it runs again on request only."""
        if published_at is None:
            return True
        return self.schedule is not None and last_fire(self.schedule, now) > published_at

    def config(self) -> dict[str, Any]:
        """The declared settings that take part in the fingerprint, in a canonical shape."""
        return {
            "grain": self.grain.value,
            "partition_column": self.partition_column,
            "start": self.start,
            "keys": list(self.keys),
            "write_mode": self.write_mode.value,
            "unique_key": list(self.unique_key),
            "schedule": self.schedule,
            "columns": [[c.name, c.type, c.nullable] for c in self.columns],
            "checks": [
                [c.name, c.kind, c.severity.value, dict(sorted(c.params.items()))]
                for c in self.checks
            ],
            # only when declared, so adding these features left earlier fingerprints unchanged
            **({"deprecated": [list(d) for d in self.deprecated]} if self.deprecated else {}),
            **(
                {
                    "reconciliations": [
                        [r.name, r.source, r.source_expression, r.target_expression, r.tolerance]
                        for r in self.reconciliations
                    ]
                }
                if self.reconciliations
                else {}
            ),
            **({"program": self.program.config()} if self.program else {}),
            **({"chunk_size": self.chunk_size} if self.chunk_size else {}),
            **({"update": self.update.config()} if self.update else {}),
            **({"cursor": self.cursor.config()} if self.cursor else {}),
            **({"key_sources": [list(p) for p in self.key_sources]} if self.key_sources else {}),
            **({"min_rows": self.min_rows} if self.min_rows is not None else {}),
            **({"dbt": self.dbt.config()} if self.dbt is not None else {}),
            **({"whole_reads": list(self.whole_reads)} if self.whole_reads else {}),
            **({"stream": self.stream.config()} if self.stream is not None else {}),
        }


class ChangeKind(str, Enum):
    """How a new version's output differs from the active one's."""

    NEW = "new"
    UNCHANGED = "unchanged"
    MODIFIED = "modified"  # logic changed, same columns
    ADDITIVE = "additive"  # columns added, none removed or retyped
    BREAKING = "breaking"  # a column removed, retyped or made NOT NULL


def classify_change(
    old: tuple[Column, ...] | None, new: tuple[Column, ...], same_fingerprint: bool
) -> ChangeKind:
    if old is None:
        return ChangeKind.NEW
    if same_fingerprint:
        return ChangeKind.UNCHANGED
    old_by_name = {c.name: c for c in old}
    new_by_name = {c.name: c for c in new}
    for name, column in old_by_name.items():
        replacement = new_by_name.get(name)
        if replacement is None or replacement.type != column.type:
            return ChangeKind.BREAKING
        if column.nullable and not replacement.nullable:
            return ChangeKind.BREAKING
    if set(new_by_name) - set(old_by_name):
        return ChangeKind.ADDITIVE
    return ChangeKind.MODIFIED


def broken_columns(old: tuple[Column, ...], new: tuple[Column, ...]) -> set[str]:
    """Columns a reader of the old table can no longer read as before: removed or retyped."""
    kept = {c.name: c.type for c in new}
    return {c.name for c in old if kept.get(c.name) != c.type}


# The fingerprint prefix of a version known only by the id commit markers name (a ledger rebuilt
# from them, whose code no longer produces that id): its definition is lost, it never runs.
LOST_DEFINITION = "lost definition "


@dataclass(frozen=True)
class Version:
    """An immutable snapshot of a model: enough to execute it again exactly."""

    version_id: str
    model: str
    seq: int
    fingerprint: str
    sql: str
    spec: ModelSpec
    upstream_fingerprints: Mapping[str, str]
    git_commit: str | None
    git_dirty: bool
    tool_versions: Mapping[str, str]
    created_at: str
    change: ChangeKind

    @property
    def label(self) -> str:
        return f"v{self.seq} ({self.version_id})"

    @property
    def lost(self) -> bool:
        """Whether only its id survives (see LOST_DEFINITION)."""
        return self.fingerprint.startswith(LOST_DEFINITION)

    @property
    def shadow_table(self) -> str:
        """Where validating this version writes its output (in the shadow schema)."""
        return f"{self.model}__v{self.seq}"
