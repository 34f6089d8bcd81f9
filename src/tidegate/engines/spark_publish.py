"""Spark's publish, atomic without a table format (docs/design.md §7): the new rows of every
partition of the window (by the write mode) are written in one Spark job into a fresh directory, one
subdirectory per partition; once the job is complete, one catalog transaction switches the
partitions' pointers by compare-and-swap and inserts the markers.

A crash before the switch leaves only directories no pointer names; a writer that lost the race
for a partition (another switched its pointer after this one read it) switches nothing.
"""

from __future__ import annotations

import contextlib
from abc import abstractmethod
from calendar import timegm
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError
from tidegate.domain.model import Column, WriteMode
from tidegate.domain.partitions import WHOLE_LABEL
from tidegate.engines.base import CommitMarker, Fence, Target
from tidegate.engines.spark_catalog import EMPTY, Catalog, Swap
from tidegate.engines.spark_layout import Layout
from tidegate.engines.spark_views import Views
from tidegate.engines.sql_queries import Params, SqlQueries
from tidegate.sql import spark as spark_sql
from tidegate.sql import statements as sql
from tidegate.sql import write_modes as write_sql
from tidegate.sql.spark import SLOT_COLUMN, SPARK

# The staging name a just-written directory is read under (no staging slot takes it: the
# executor's names are identifiers). The publisher of a process is serial.
WRITTEN = "tidegate:written"


@dataclass(frozen=True)
class _Slot:
    """One partition a publish writes: its pointer's slot in the catalog, its start (the
    value of the slot column its rows carry), and its marker's attempt."""

    slot: str
    start: int
    attempt_id: str | None = None


class SparkPublish(SqlQueries):
    """The publish of SparkEngine, which provides the session, views, catalog and layout."""

    layout: Layout
    _catalog: Catalog
    _views: Views
    _read_only: bool

    @abstractmethod
    def _frame(self, statement: str, params: Params | None = None) -> Any: ...

    @abstractmethod
    def _failure(self, error: Exception) -> BaseException: ...

    @abstractmethod
    def _busy(self) -> AbstractContextManager[None]: ...

    def publish(
        self,
        target: Target,
        staging: str,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        fence: Fence | None = None,
    ) -> dict[int, Checksum]:
        if self._read_only:
            raise EngineError("spark: this warehouse was opened read-only")
        if target.write_mode is WriteMode.MERGE and not target.unique_key:
            raise ValueError(f"{target.name}: a merge matches rows by a unique key; none given")
        if target.write_mode is WriteMode.APPEND and not target.unique_key:
            self._refuse_republish(markers)
        existing = self._catalog.columns(target.name, target.schema)
        columns = _evolved(target.columns, existing)
        slots = publish_slots(target, bounds, markers)
        # what each partition held when this writer looked: the compare of the swap
        expected = self._catalog.pointers(target.name, target.schema)
        first = markers[0].attempt_id if markers else "unmarked"
        written = self.layout.publish(target.name, target.schema, first)
        try:
            path = self.layout.path(written)
            self._write(target, staging, columns, existing, slots, bounds, path)
            present = self.layout.present(written, [s.start for s in slots], self._views)
            directories = {
                s.slot: self.layout.slot(written, s.start) if s.start in present else EMPTY
                for s in slots
            }
            content = {}
            if target.write_mode is not WriteMode.OVERWRITE and markers:
                paths = [self.layout.path(d) for d in directories.values() if d]
                content = self._content(target, columns, bounds, markers, paths)
            if content:
                markers = [replace(m, checksum=str(content[m.partition_start])) for m in markers]
            swaps = [
                Swap(s.slot, expected.get(s.slot), directories[s.slot], s.attempt_id) for s in slots
            ]
            self._catalog.swap(target.name, target.schema, columns, swaps, markers, fence)
        except BaseException:
            self.layout.remove(written)
            raise
        with contextlib.suppress(EngineError):
            self.drop_staging(staging)
        return content

    def raise_fence(self, fence: Fence) -> None:
        self._catalog.raise_fence(fence)

    def _write(
        self,
        target: Target,
        staging: str,
        columns: Sequence[Column],
        existing: Sequence[Column] | None,
        slots: Sequence[_Slot],
        bounds: Mapping[str, Any],
        path: str,
    ) -> None:
        """One Spark job: the window's new rows, a subdirectory of `path` per partition."""
        grain = None if target.keyed or len(slots) == 1 else _grain(target)
        statement = self._statement(
            ("publish rows", target, staging, tuple(columns), existing is None, grain),
            lambda: spark_sql.publish_rows(
                sql.table(target.name, target.schema),
                self._staged(staging),
                columns,
                [c.name for c in target.columns],
                None if existing is None else [c.name for c in existing],
                target.partition_column,
                target.keyed,
                grain,
                target.write_mode,
                target.unique_key,
            ),
        )
        values = {**bounds, "slot": slots[0].start}
        with self._busy():
            frame = self._frame(statement, self._bind(values, statement))
            try:
                frame.write.partitionBy(SLOT_COLUMN).parquet(path)
            except Exception as error:
                raise self._failure(error) from error

    def _refuse_republish(self, markers: Sequence[CommitMarker]) -> None:
        """Append without a unique key writes a partition once: one with a marker refuses."""
        for model in sorted({m.model for m in markers}):
            starts = sorted({m.partition_start for m in markers if m.model == model})
            found = self._catalog.marked_starts(model, starts)
            if found:
                raise EngineError(
                    f"{model}: append without a unique key publishes a partition once; "
                    f"{len(found)} of these partitions are published already, and appending "
                    "again would duplicate their rows"
                )

    def _content(
        self,
        target: Target,
        columns: Sequence[Column],
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        paths: list[str],
    ) -> dict[int, Checksum]:
        """The checksum of what each marked partition holds in these files or directories,
        read in one pass (over the target's columns, like a staged partition's checksum)."""
        self._views.show(self._staged(WRITTEN), columns, paths)
        try:
            return self._measure(target, bounds, markers, WRITTEN)
        finally:
            self.drop_staging(WRITTEN)

    def _measure(
        self,
        target: Target,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        staging: str,
    ) -> dict[int, Checksum]:
        """The checksum of each marked partition's rows of a staged view, in one pass."""
        names = [c.name for c in target.columns]
        grain = None if target.keyed else target.grain or markers[0].grain
        statement = write_sql.partition_content(
            self._staged(staging), names, target.partition_column, grain, SPARK
        )
        rows = self._run(statement, self._bind(bounds, statement)).fetchall()
        if target.keyed:
            return {m.partition_start: Checksum(int(rows[0][0]), int(rows[0][1])) for m in markers}
        measured = {int(r[0]): Checksum(int(r[1]), int(r[2])) for r in rows if r[0] is not None}
        return {m.partition_start: measured.get(m.partition_start, Checksum(0, 0)) for m in markers}


def _evolved(columns: Sequence[Column], existing: Sequence[Column] | None) -> list[Column]:
    """The table's columns after this publish: the ones it had, then the target's new ones."""
    if existing is None:
        return list(columns)
    known = {c.name for c in existing}
    return [*existing, *[c for c in columns if c.name not in known]]


def publish_slots(
    target: Target, bounds: Mapping[str, Any], markers: Sequence[CommitMarker]
) -> list[_Slot]:
    """The partitions a publish writes: one per marker; without markers (a shadow table of
    `validate`), the window of `bounds` as one. A key list's partition is its key's; a whole
    table's (no partition column) is its one partition's label."""
    if target.keyed:
        start = markers[0].partition_start if markers else 0
        slot = str(bounds["key"]) if target.partition_column else WHOLE_LABEL
        return [_Slot(slot, start, markers[0].attempt_id if markers else None)]
    if not markers:
        start = timegm(bounds["start"].timetuple())
        return [_Slot(str(start), start)]
    return [_Slot(str(m.partition_start), m.partition_start, m.attempt_id) for m in markers]


def _grain(target: Target) -> str:
    if target.grain is None:
        raise ValueError(f"{target.name}: a publish of several time partitions needs the grain")
    return target.grain
