"""Spark's publish, atomic without a table format (SPEC §7): each partition's new rows (by the
write mode) go into a fresh attempt directory; once every directory is complete, one catalog
transaction switches the partitions' pointers by compare-and-swap and inserts the markers.

A crash before the switch leaves only directories no pointer names; a writer that lost the race
for a partition (another switched its pointer after this one read it) switches nothing.
"""

from __future__ import annotations

import contextlib
from abc import abstractmethod
from calendar import timegm
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError
from tidegate.domain.model import Column, WriteMode
from tidegate.engines.base import CommitMarker, Target, window_bounds
from tidegate.engines.spark_catalog import Catalog, Swap
from tidegate.engines.spark_layout import Layout, key_label, time_label
from tidegate.engines.spark_views import Views
from tidegate.engines.sql_queries import Params, SqlQueries
from tidegate.sql import spark as spark_sql
from tidegate.sql import statements as sql


@dataclass(frozen=True)
class _Slot:
    """One partition a publish writes: its pointer's slot in the catalog, its name in the
    directory path, the values that select its rows, and its marker's start and attempt."""

    slot: str
    label: str
    values: Mapping[str, Any]
    start: int | None = None
    attempt_id: str | None = None


class SparkPublish(SqlQueries):
    """The publish of SparkEngine, which provides the session, views, catalog and layout."""

    layout: Layout
    _catalog: Catalog
    _views: Views
    _read_only: bool

    @abstractmethod
    def _frame(self, statement: str, params: Params | None = None) -> Any: ...

    def publish(
        self,
        target: Target,
        staging: str,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
    ) -> dict[int, Checksum]:
        if self._read_only:
            raise EngineError("spark: this warehouse was opened read-only")
        existing = self._catalog.columns(target.name, target.schema)
        if target.write_mode is WriteMode.APPEND and not target.unique_key:
            self._refuse_republish(markers)
        if target.write_mode is WriteMode.MERGE and not target.unique_key:
            raise ValueError(f"{target.name}: a merge matches rows by a unique key; none given")
        columns = _evolved(target.columns, existing)
        slots = _slots(target, bounds, markers)
        # what each partition held when this writer looked: the compare of the swap
        expected = self._catalog.pointers(target.name, target.schema)
        written: dict[str, str] = {}
        try:
            statement = self._statement(
                ("partition rows", target, staging, tuple(columns), existing is None),
                lambda: spark_sql.partition_rows(
                    sql.table(target.name, target.schema),
                    self._staged(staging),
                    columns,
                    [c.name for c in target.columns],
                    None if existing is None else {c.name for c in existing},
                    target.partition_column,
                    target.keyed,
                    target.write_mode,
                    target.unique_key,
                ),
            )
            for slot in slots:
                directory = self.layout.attempt(
                    target.name,
                    target.schema,
                    target.partition_column,
                    slot.label,
                    slot.attempt_id or "unmarked",
                )
                written[slot.slot] = directory
                self._write(statement, slot.values, directory)
            content = self._content(target, columns, slots, written)
            if content:
                markers = [replace(m, checksum=str(content[m.partition_start])) for m in markers]
            swaps = [
                Swap(s.slot, expected.get(s.slot), written[s.slot], s.attempt_id) for s in slots
            ]
            self._catalog.swap(target.name, target.schema, columns, swaps, markers)
        except BaseException:
            for directory in written.values():
                self.layout.remove(directory)
            raise
        with contextlib.suppress(EngineError):
            self.drop_staging(staging)
        return content

    def _write(self, statement: str, values: Mapping[str, Any], directory: str) -> None:
        frame = self._frame(statement, self._bind(values, statement))
        try:
            frame.write.parquet(self.layout.path(directory))
        except Exception as error:
            raise EngineError(f"spark: {_first_line(error)}") from error

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
        slots: Sequence[_Slot],
        written: Mapping[str, str],
    ) -> dict[int, Checksum]:
        """For merge and append: the checksum of what each marked partition holds now, read
        from the directory just written (over the target's columns, like a staged checksum)."""
        if target.write_mode is WriteMode.OVERWRITE:
            return {}
        names = [c.name for c in target.columns]
        content: dict[int, Checksum] = {}
        try:
            for slot in slots:
                if slot.start is not None:
                    self._views.show(self._staged(WRITTEN), columns, written[slot.slot])
                    content[slot.start] = self.checksum(WRITTEN, names)
        finally:
            self.drop_staging(WRITTEN)
        return content


# The staging name a just-written directory is read under (no staging slot takes it: the
# executor's names are identifiers). The publisher of a process is serial.
WRITTEN = "tidegate:written"


def _evolved(columns: Sequence[Column], existing: Sequence[Column] | None) -> list[Column]:
    """The table's columns after this publish: the ones it had, then the target's new ones."""
    if existing is None:
        return list(columns)
    known = {c.name for c in existing}
    return [*existing, *[c for c in columns if c.name not in known]]


def _slots(
    target: Target, bounds: Mapping[str, Any], markers: Sequence[CommitMarker]
) -> list[_Slot]:
    """The partitions a publish writes: one per marker; without markers (a shadow table of
    `validate`), the window of `bounds` as one."""
    if target.keyed:
        key = str(bounds["key"])
        attempt = markers[0] if markers else None
        return [
            _Slot(
                key,
                key_label(key),
                {"key": key},
                None if attempt is None else attempt.partition_start,
                None if attempt is None else attempt.attempt_id,
            )
        ]
    if not markers:
        start = timegm(bounds["start"].timetuple())
        return [_Slot(str(start), time_label(start), bounds)]
    return [
        _Slot(
            str(m.partition_start),
            time_label(m.partition_start),
            window_bounds(m.partition_start, m.partition_end),
            m.partition_start,
            m.attempt_id,
        )
        for m in markers
    ]


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
