"""The Engine seam: what tidegate asks of a warehouse."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from tidegate.domain.checksum import Checksum
from tidegate.domain.model import CheckSpec, Column, WriteMode
from tidegate.domain.partitions import Grain, PartitionKey, to_utc


@dataclass(frozen=True)
class Capabilities:
    """What an engine can promise; code branches on these flags, never on engine names."""

    transactional_publish: bool
    single_writer_process: bool
    # publishes a cursor model's (start, end] partitions (sql_engine.py)
    cursor_models: bool = False
    # reads the snapshot a cursor's max was seen in: transactions commit out of order
    cursor_snapshots: bool = False
    # keeps the data an earlier attempt published, to publish again (Restorer)
    restores: bool = False
    # writes a publish's data on the worker that staged it, before the publish (AheadWriter)
    writes_ahead: bool = False


@dataclass(frozen=True)
class CommitMarker:
    """The warehouse's own record that a partition's publish committed."""

    attempt_id: str
    model: str
    grain: str
    partition_start: int
    partition_end: int
    run_id: str
    version_id: str
    checksum: str
    published_at: str


@dataclass(frozen=True)
class Fence:
    """A lease's fencing token and the partitions it covers (docs/design.md §7): each new lease
    raises their fences, and a publish carrying an older token is refused by the warehouse itself —
    a worker that slept past its lease can never publish, whichever run later took the
    partitions."""

    keys: tuple[str, ...]
    token: int


@dataclass(frozen=True)
class PartitionProfile:
    """What one pass over a partition's rows measured."""

    checksum: Checksum
    # one per check: violating rows (every row for row_count, NULLs for null_ratio), distinct
    # values (distinct_count), or the newest value in epoch seconds (freshness; None if none)
    measured: tuple[int | None, ...] = ()
    values: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class Target:
    """Where a model publishes, and how its partitions are recognised."""

    name: str
    columns: tuple[Column, ...]
    partition_column: str
    keyed: bool
    # None: the warehouse's default schema, where readers find published tables
    schema: str | None = None
    write_mode: WriteMode = WriteMode.OVERWRITE
    # merge and append match published and staged rows by this key (append may have none)
    unique_key: tuple[str, ...] = ()
    # the time grain of the partitions (None for key lists): merge and append match rows only
    # within one partition
    grain: str | None = None
    # a cursor model's: a partition is (start, end] of the partition column, a unit of its own
    cursor: bool = False


@dataclass(frozen=True)
class Relation:
    """A table read by a comparison (`diff`): its rows fall into partitions of `grain` by
    `partition_column`; for key lists, a row's partition is the position of its value in `keys`."""

    name: str
    schema: str | None
    partition_column: str
    grain: str
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class PartitionSummary:
    """Aggregates of one partition of a table: rows, exact sums (as text; None when every value
    is NULL) of numeric columns and NULL counts of columns."""

    rows: int
    sums: Mapping[str, str | None]
    nulls: Mapping[str, int]


@dataclass(frozen=True)
class KeyDifference:
    """Keys of one kind of difference (only left, only right, changed) in one partition: how
    many, the first few in key order (each a tuple of text values, one per key column) and, for
    changed keys, how many changed each compared column."""

    count: int
    sample: tuple[tuple[str | None, ...], ...]
    columns: Mapping[str, int]


# [start, end) holding every partition key (int64)
EVERY = (-(2**63), 2**63 - 1)


class MarkerReader(Protocol):
    """The smallest face of a warehouse: its commit markers (what the ledger check of a
    command and `verify` read without computing anything)."""

    def markers_of(
        self, model: str, start: int = EVERY[0], end: int = EVERY[1]
    ) -> list[CommitMarker]:
        """As Engine.markers_of. Read-only."""

    def close(self) -> None:
        """Release the warehouse. Idempotent."""


def bound_values(partition: PartitionKey, key_label: str | None = None) -> dict[str, Any]:
    """Driver-bound values for a partition's placeholders ($start/$end, or $key; none for a
    whole table)."""
    if partition.grain is Grain.TABLE:
        return {}
    if partition.grain is Grain.KEY:
        return {"key": key_label}
    if partition.grain is Grain.RANGE:
        return {"start": partition.start, "end": partition.end}  # the keys themselves
    return window_bounds(partition.start, partition.end)


def window_bounds(start: int, end: int) -> dict[str, Any]:
    """$start/$end for the time window [start, end) in epoch seconds."""
    return {"start": _naive_utc(to_utc(start)), "end": _naive_utc(to_utc(end))}


def _naive_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=None)


class Restorer(Protocol):
    """An engine whose warehouse keeps what earlier attempts published (Iceberg's snapshots):
    one with `capabilities.restores`."""

    def stage_restored(
        self, staging: str, target: Target, attempt_id: str, bounds: Mapping[str, Any]
    ) -> None:
        """A fresh staging table holding the rows attempt `attempt_id` published into the
        target's partition of `bounds`, read from the files it wrote. Raises EngineError when
        the attempt's publish is not in the table's history or its files are gone."""


class AheadWriter(Protocol):
    """An engine whose publish writes its data before it commits (an Iceberg table's files):
    one with `capabilities.writes_ahead`. Publishes run one at a time; writing ahead moves that
    work onto the workers."""

    def write_ahead(
        self,
        target: Target,
        staging: str,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
    ) -> None:
        """Write what the publish of `staging` (with markers of these attempts and partitions)
        will commit, on the handle that staged it, once its rows passed their audit. Commits
        nothing: the publish commits what was written if the table is still as it was written
        for (else writes again), and `drop_staging` removes what no publish committed. Writes
        nothing where it cannot, and never raises for it: the publish then writes, and says
        what failed."""


class Engine(Protocol):
    """A warehouse. Every method raises EngineError (a TidegateError) on engine failures."""

    name: str
    capabilities: Capabilities

    def version(self) -> str:
        """The engine's version string. Idempotent."""

    def prepare(self) -> None:
        """Create tidegate's bookkeeping schemas and marker table. Idempotent."""

    def table_columns(self, name: str, schema: str | None = None) -> list[Column] | None:
        """Columns of a published table, or None when it does not exist. Read-only."""

    def cursor_extent(self, table: str, column: str) -> tuple[Any, Any, str | None]:
        """min and max of a cursor column of a table (None, None when it has no rows) and,
        with `cursor_snapshots`, the transactions open when they were read (`backend/local`
        ids, comma separated), in one statement. Read-only."""

    def cursor_unique(self, table: str, column: str) -> bool:
        """Whether a single-column primary key or unique constraint of `table` holds `column`
        (False when unknown). Read-only."""
        return False

    def open_transactions(self) -> str:
        """The transactions open now, as `cursor_extent` lists them (`cursor_snapshots`
        only). Read-only."""

    def cursor_batch_end(
        self, table: str, column: str, bounds: Mapping[str, Any], rows: int
    ) -> Any | None:
        """The cursor value of the `rows`-th row in the interval `bounds` ($start, $end] in
        cursor order, or None when it holds fewer rows. Read-only."""

    def cursor_fingerprint(
        self,
        table: str,
        column: str,
        bounds: Mapping[str, Any],
        aggregates: Sequence[str] = (),
    ) -> tuple[Checksum, list[str | None]]:
        """The checksum of a table's rows in the cursor interval `bounds`, and `aggregates`
        over them as text, in one pass. Read-only."""

    def key_fingerprint(
        self,
        table: str,
        key_column: str,
        bounds: Mapping[str, Any],
        aggregates: Sequence[str] = (),
    ) -> tuple[Checksum, list[str | None]]:
        """The checksum of a table's rows whose `key_column` holds the key bound as $key, and
        `aggregates` over them as text, in one pass. Read-only."""

    def staged_aggregates(self, staging: str, expressions: Sequence[str]) -> list[str | None]:
        """Aggregate expressions over a staging slot's rows, as text. Read-only."""

    def query_columns(self, sql: str, bounds: Mapping[str, Any]) -> list[Column]:
        """The columns and types a model's query would produce for a partition, from the
        engine's planner without running it (nullability unknown: every column nullable).
        Raises EngineError when the query cannot be planned (a table or column it reads is
        missing). Read-only."""

    def stage(self, staging: str, sql: str, bounds: Mapping[str, Any]) -> None:
        """Compute a model's query into a fresh staging table no reader sees.

        Not idempotent (the staging name must be new); a failure leaves no staging table.
        """

    def stage_arrow(self, staging: str, data: Any) -> None:
        """A fresh staging table holding Arrow rows — a pyarrow.Table, or a
        pyarrow.RecordBatchReader read batch by batch (memory holds one batch, not the whole) —
        with the columns and types of their schema (arrow_types.column_type).

        Not idempotent (the staging name must be new); a failure leaves no staging table.
        """

    def read_arrow(self, table: str, time_column: str | None, bounds: Mapping[str, Any]) -> Any:
        """The rows of a published or source table as a pyarrow.Table: those in the
        $start/$end window of `time_column` (bound as values, never pasted into SQL), or every
        row when it is None. Read-only."""

    def staging_columns(self, staging: str, count_nulls: bool = True) -> list[Column]:
        """Columns of a staging table with their types and whether NULLs occur (without
        `count_nulls`, only the types: every column reads as holding none). Read-only."""

    def measure(self, check: CheckSpec, staging: str, bounds: Mapping[str, Any]) -> int | None:
        """The measured value of a check (any kind but `query`) on a whole staging table, as
        `PartitionProfile.measured` defines it. Read-only."""

    def measure_query(
        self,
        check: CheckSpec,
        staging: str,
        tables: Mapping[str, str],
        partition_column: str,
        grain: str | None,
    ) -> dict[int | None, int]:
        """Rows a `query` check's SELECT returns when `this` in it names the staging table and
        each name in `tables` the published table it maps to, counted per time partition of
        `grain` on the partition column it returns (a NULL one under None; `grain` None: every
        row under None). Read-only."""

    def checksum(self, staging: str, columns: Sequence[str]) -> Checksum:
        """Content checksum of a staging table over `columns`, in that order. Read-only."""

    def source_fingerprint(
        self, table: str, time_column: str, bounds: Mapping[str, Any]
    ) -> Checksum:
        """Checksum of the source rows in a partition's time window. Read-only."""

    def frozen_while_open(self, table: str) -> bool:
        """Whether no other process can change the table's rows while this warehouse is
        open, so that reading it twice in a run reads the same rows (a table stored in
        DuckDB's file, which the open warehouse keeps locked; never a view, whose rows may
        come from files). Read-only."""

    def profile(
        self,
        table: str,
        staged: bool,
        partition_column: str,
        grain: str,
        bounds: Mapping[str, Any] | None,
        columns: Sequence[str] | None = None,
        checks: Sequence[CheckSpec] = (),
        aggregates: Sequence[str] = (),
    ) -> dict[int | None, PartitionProfile]:
        """One pass over a staging table (`staged`) or a published/source table, grouped by time
        partition of `grain` on `partition_column`: each partition's checksum over `columns`
        (None: every column, with the engine's cheaper native hash — for input fingerprints),
        the measured value of each check (any kind but `query`) and each aggregate's value as
        text. With `bounds`, only rows in the $start/$end window. Read-only."""

    def count_in_window(self, table: str, time_column: str, bounds: Mapping[str, Any]) -> int:
        """Rows of a table in the $start/$end window of its time column. Read-only."""

    def aggregates_by_partition(
        self,
        table: str,
        staged: bool,
        time_column: str,
        grain: str,
        expressions: Sequence[str],
        bounds: Mapping[str, Any],
    ) -> dict[int, list[str | None]]:
        """Per time partition in the window: aggregate expressions over a published or staging
        table, as text. Read-only."""

    def partition_summaries(
        self,
        relation: Relation,
        columns: Sequence[str],
        numeric: Sequence[str],
        window: tuple[int, int] | None,
    ) -> dict[int, PartitionSummary]:
        """Per partition of `relation` (only those in [start, end) of `window`, given in the
        grain's bounds): its rows, the sum of each `numeric` column and the NULL count of each of
        `columns`. One pass; returns one value per partition, never rows. Read-only."""

    def key_differences(
        self,
        left: Relation,
        right: Relation,
        key: Sequence[tuple[str, str]],
        compared: Sequence[tuple[str, str]],
        window: tuple[int, int],
        tolerance: float = 0.0,
        sample: int = 5,
    ) -> dict[int, dict[str, KeyDifference]]:
        """Per partition in `window`, the rows of `left` and `right` matched on `key`: the keys
        only one side has (`only_left`, `only_right`) and the keys whose `compared` columns
        differ (`changed`), each with at most `sample` keys. `key` and `compared` are (column,
        mode) pairs: `exact` (IS DISTINCT FROM), `text` (compared as text: the sides' types
        differ) or `numeric` (changed only beyond the relative `tolerance`). Both relations
        share one grain (and key list). Partitions without differences are absent. Read-only."""

    def handle(self) -> Engine:
        """Another handle on the same warehouse, for a worker thread. Close it after use."""

    def share_cores(self, batches_in_flight: int) -> None:
        """Size the engine's own parallelism in this process for `batches_in_flight` batches
        running at once, each on a worker thread of its own (1: one batch has the machine).
        Engines whose statements run in another process ignore it."""

    def publish(
        self,
        target: Target,
        staging: str,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        fence: Fence | None = None,
    ) -> dict[int, Checksum]:
        """Write the staging rows into the partitions in the $start/$end (or $key) window as
        the target's write mode says, and insert one marker per partition, atomically:

        - overwrite: the partitions' rows are replaced by the staged ones;
        - merge: their rows whose unique key the staged rows hold are replaced, the staged rows
          with new keys are added, the others stay;
        - append: the staged rows are added; with a unique key, only those whose key the
          partition does not hold yet. Without one, a partition that has a marker already
          raises EngineError (appending again would duplicate its rows).

        Returns, for merge and append, the checksum of what each marked partition holds after
        the write (by partition start; measured in the transaction like a staged partition's
        checksum, over the target's columns), which its marker carries instead of the one
        given; for overwrite nothing: the staged checksums are the content.

        Transactional: either the data and every marker commit, or nothing does and the
        previous data stays untouched. Creates the table or adds new nullable columns (additive
        changes) in the same transaction. Drops the staging table afterwards. Raises EngineError
        when a marker's attempt already published (one marker per attempt), and, with a `fence`,
        when the fence of one of its keys has been raised past its token (FencedError).
        """

    def raise_fence(self, fence: Fence) -> None:
        """Raise the fences of `fence.keys` to `fence.token` (where lower) and commit: from then
        on a publish carrying an older token for one of them fails. Waits for a publish holding
        one of them."""

    def markers(self, attempt_ids: Sequence[str]) -> dict[str, CommitMarker]:
        """Commit markers of the given attempts that exist. Read-only."""

    def markers_of(
        self, model: str, start: int = EVERY[0], end: int = EVERY[1]
    ) -> list[CommitMarker]:
        """Every commit marker of `model` whose partition starts in [start, end), in partition
        order and, within a partition, oldest first (by attempt id: published_at follows
        `--as-of`); none before anything was published. Read-only (works on a read-only
        handle)."""

    def drop_staging(self, staging: str | None = None) -> int:
        """Drop one staging table, or every one when `staging` is None. Idempotent."""

    def staging_tables(self) -> list[str]:
        """Names of staging tables present. Read-only."""

    def interrupt(self) -> None:
        """Abort the statement running on this handle (from another thread)."""

    def close(self) -> None:
        """Release the warehouse (and its writer lock). Idempotent."""
