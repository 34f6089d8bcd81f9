"""What the SQL warehouses with transactions (DuckDB, PostgreSQL) do alike when they publish:
the staged rows written by the write mode and the commit markers inserted in one transaction of
the warehouse. The reading half is sql_queries.py; each engine gives the publish hooks: its
marker insert, its transaction and what follows it."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import partial
from typing import Any

from sqlglot import exp

from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError, FencedError
from tidegate.domain.model import Column, WriteMode
from tidegate.engines.base import EVERY, CommitMarker, Fence, Target
from tidegate.engines.sql_queries import Params as Params
from tidegate.engines.sql_update import RangeUpdates
from tidegate.sql import statements as sql
from tidegate.sql import write_modes as write_sql


class SqlEngine(RangeUpdates):
    """An engine that speaks SQL and publishes in one transaction of its warehouse (and updates
    tables in place: sql_update.py)."""

    # hooks ---------------------------------------------------------------------------------

    @abstractmethod
    def _ensure_target_schema(self, schema: str | None) -> None:
        """The schema a new published table goes in exists."""

    @abstractmethod
    def _publish_transaction(self, staging: str) -> AbstractContextManager[None]:
        """One transaction around a publish's writes and markers."""

    @abstractmethod
    def _hold_target(self, target: Target) -> None:
        """In a publish's transaction, before it reads the target's columns: writers that share
        the warehouse publish into one table one at a time."""

    @abstractmethod
    def _after_publish(self, staging: str) -> None:
        """What follows a committed publish."""

    def share_cores(self, batches_in_flight: int) -> None:
        """A server runs each session's statements in a process of its own."""

    # markers -------------------------------------------------------------------------------------

    def markers(self, attempt_ids: Sequence[str]) -> dict[str, CommitMarker]:
        found: dict[str, CommitMarker] = {}
        ids = list(attempt_ids)
        for offset in range(0, len(ids), 500):
            chunk = ids[offset : offset + 500]
            # built once per size: every batch's read of an upstream model asks again
            statement = self._statement(
                ("select markers", len(chunk)),
                partial(sql.select_markers, len(chunk), self.flavor),
            )
            for row in self._run(statement, chunk).fetchall():
                marker = CommitMarker(*row)
                found[marker.attempt_id] = marker
        return found

    def markers_of(
        self, model: str, start: int = EVERY[0], end: int = EVERY[1]
    ) -> list[CommitMarker]:
        # a warehouse no writer prepared has no marker table (and a read-only handle may not
        # create it): nothing was published there
        if self.table_columns(sql.MARKERS, sql.META_SCHEMA) is None:
            return []
        statement = self._statement(("markers of",), lambda: sql.select_markers_of(self.flavor))
        return [CommitMarker(*row) for row in self._run(statement, [model, start, end]).fetchall()]

    # publish ----------------------------------------------------------------------------------

    def publish(
        self,
        target: Target,
        staging: str,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        fence: Fence | None = None,
    ) -> dict[int, Checksum]:
        where = (target.schema, target.name)
        writes = self._writes(target, staging)
        marker_insert = self._statement(("markers",), self._insert_markers)
        content: dict[int, Checksum] = {}
        with self._publish_transaction(staging):
            if fence is not None:
                self._hold_fence(fence)
            self._hold_target(target)
            # One writer holds the warehouse, so the columns it last saw or wrote are still
            # there; writers sharing it read them under the target's lock.
            existing = self._published_columns.get(where) or self.table_columns(
                target.name, target.schema
            )
            self._evolve(target, existing)
            if target.write_mode is WriteMode.APPEND and not target.unique_key:
                self._refuse_republish(markers)
            for statement in writes:
                self._run(statement, self._bind(bounds, statement))
            if target.write_mode is not WriteMode.OVERWRITE and markers:
                content = self._content(target, bounds, markers)
                markers = [replace(m, checksum=str(content[m.partition_start])) for m in markers]
            if markers:
                self._run(
                    marker_insert,
                    {n: [getattr(m, n) for m in markers] for n in sql.MARKER_COLUMNS},
                )
        self._published_columns[where] = (
            list(target.columns)
            if existing is None
            else [
                *existing,
                *[c for c in target.columns if c.name not in {e.name for e in existing}],
            ]
        )
        self._after_publish(staging)
        return content

    def raise_fence(self, fence: Fence) -> None:
        self._run(sql.fences_ddl(self.flavor))  # made by prepare where writers share a warehouse
        with self._transaction():
            for key in sorted(fence.keys):  # one order for every writer: no deadlock
                values = {"fence_key": key, "token": fence.token}
                for statement in (sql.add_fence(self.flavor), sql.raise_fence(self.flavor)):
                    self._run(statement, self._bind(values, statement))

    def _hold_fence(self, fence: Fence) -> None:
        statement = self._statement(("hold fence",), lambda: sql.hold_fence(self.flavor))
        for key in sorted(fence.keys):
            values = {"fence_key": key, "token": fence.token}
            if self._run(statement, self._bind(values, statement)).fetchone() is None:
                raise FencedError(
                    f"fenced: a newer lease holds partition {key.rsplit('/', 1)[-1]} (token "
                    f"{fence.token} is stale); nothing was published"
                )

    def _evolve(self, target: Target, existing: list[Column] | None) -> None:
        """Create the published table, or add the target's new columns (nullable)."""
        published = sql.table(target.name, target.schema)
        if existing is None:
            self._ensure_target_schema(target.schema)
            self._run(sql.create_table(published, target.columns, flavor=self.flavor))
            return
        known = {c.name for c in existing}
        for col in target.columns:
            if col.name not in known:
                self._run(sql.add_column(published, Column(col.name, col.type), self.flavor))

    def _writes(self, target: Target, staging: str, into: exp.Table | None = None) -> list[str]:
        """The statements that write the staged rows as the target's write mode says (into the
        published table, or the table `into`), built once per target and staging slot."""
        published = into or sql.table(target.name, target.schema)
        where = published.sql()
        source = self._staged(staging)
        at, key, flavor = target.partition_column, target.unique_key, self.flavor
        insert = self._statement(
            ("insert", where, target.columns, staging),
            lambda: sql.insert_from(published, target.columns, source, flavor),
        )
        if target.write_mode is WriteMode.OVERWRITE:
            delete = self._statement(
                ("delete", where, at, target.keyed, target.cursor),
                lambda: sql.delete_partition(published, at, target.keyed, flavor, target.cursor),
            )
            return [delete, insert]
        if not key:
            if target.write_mode is WriteMode.MERGE:
                raise ValueError(f"{target.name}: a merge matches rows by a unique key; none given")
            return [insert]
        grain = None if target.keyed else _grain(target)
        if target.write_mode is WriteMode.MERGE:
            matched = self._statement(
                ("delete matched", where, target, staging),
                lambda: write_sql.delete_matched(
                    published, source, at, target.keyed, key, grain, flavor, target.cursor
                ),
            )
            return [matched, insert]
        unmatched = self._statement(
            ("insert unmatched", where, target, staging),
            lambda: write_sql.insert_unmatched(
                published,
                target.columns,
                source,
                at,
                target.keyed,
                key,
                grain,
                flavor,
                target.cursor,
            ),
        )
        return [unmatched]

    def _refuse_republish(self, markers: Sequence[CommitMarker]) -> None:
        """Append without a unique key writes a partition once: one with a marker refuses."""
        for model in sorted({m.model for m in markers}):
            starts = sorted({m.partition_start for m in markers if m.model == model})
            statement = write_sql.published_starts(len(starts), self.flavor)
            found = self._run(statement, [model, *starts]).fetchall()
            if found:
                raise EngineError(
                    f"{model}: append without a unique key publishes a partition once; "
                    f"{len(found)} of these partitions are published already, and appending "
                    "again would duplicate their rows"
                )

    def _content(
        self,
        target: Target,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
        of: exp.Table | None = None,
    ) -> dict[int, Checksum]:
        """What each marked partition holds now (in the published table, or the table `of`),
        read inside the publish's transaction."""
        published = of or sql.table(target.name, target.schema)
        names = [c.name for c in target.columns]
        grain = None if target.keyed else _grain(target)
        statement = self._statement(
            ("content", published.sql(), target),
            lambda: write_sql.partition_content(
                published, names, target.partition_column, grain, self.flavor, target.cursor
            ),
        )
        rows = self._run(statement, self._bind(bounds, statement)).fetchall()
        if target.keyed:
            # a key list's partition is a unit of its own: one marker, one row
            return {m.partition_start: Checksum(int(rows[0][0]), int(rows[0][1])) for m in markers}
        measured = {int(r[0]): Checksum(int(r[1]), int(r[2])) for r in rows if r[0] is not None}
        return {m.partition_start: measured.get(m.partition_start, Checksum(0, 0)) for m in markers}


def _grain(target: Target) -> str:
    if target.grain is None:
        raise ValueError(f"{target.name}: a {target.write_mode.value} by time needs the grain")
    return target.grain
