"""PostgreSQL's publish: the staged rows into a partition by the write mode, with the commit
markers, in one transaction (SPEC §5). The staging table is dropped in the same transaction: a
staging table and its published rows never both exist after a commit."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import psycopg

from tidegate.domain.checksum import Checksum
from tidegate.domain.errors import EngineError
from tidegate.domain.model import Column, WriteMode
from tidegate.engines.base import CommitMarker, Target
from tidegate.sql import postgres as pg
from tidegate.sql import statements as sql
from tidegate.sql import write_modes as write_sql
from tidegate.sql.postgres import POSTGRES

if TYPE_CHECKING:
    from tidegate.engines.postgres_connection import Warehouse


class PostgresPublish:
    """The publishing half of PostgresEngine, which provides the connection and statement
    helpers declared here."""

    warehouse: Warehouse
    _con: psycopg.Connection[tuple[Any, ...]]
    _published_columns: dict[tuple[str | None, str], list[Column]]

    if TYPE_CHECKING:  # provided by PostgresEngine

        def _run(
            self, statement: str, params: Mapping[str, Any] | Sequence[Any] | None = None
        ) -> psycopg.Cursor[Any]: ...

        def _statement(self, key: tuple[object, ...], build: Callable[[], str]) -> str: ...

        def _drop_statement(self, staging: str) -> str: ...

        def _ensure_schema(self, schema: str) -> None: ...

        def table_columns(self, name: str, schema: str | None = None) -> list[Column] | None: ...

    def publish(
        self,
        target: Target,
        staging: str,
        bounds: Mapping[str, Any],
        markers: Sequence[CommitMarker],
    ) -> dict[int, Checksum]:
        where = (target.schema, target.name)
        # One writer holds the warehouse, so the columns it last saw or wrote are still there.
        existing = self._published_columns.get(where) or self.table_columns(
            target.name, target.schema
        )
        writes = self._writes(target, staging)
        marker_insert = self._statement(("markers",), pg.insert_markers)
        content: dict[int, Checksum] = {}
        values = dict(bounds)
        try:
            with self._con.transaction():
                self._evolve(target, existing)
                if target.write_mode is WriteMode.APPEND and not target.unique_key:
                    self._refuse_republish(markers)
                for statement in writes:
                    self._run(statement, values)
                if target.write_mode is not WriteMode.OVERWRITE and markers:
                    content = self._content(target, values, markers)
                    markers = [
                        replace(m, checksum=str(content[m.partition_start])) for m in markers
                    ]
                if markers:
                    self._run(
                        marker_insert,
                        {n: [getattr(m, n) for m in markers] for n in sql.MARKER_COLUMNS},
                    )
                self._run(self._drop_statement(staging))
        except psycopg.Error as error:
            # the commit itself failed (the statements raise EngineError): nothing was written
            raise EngineError(f"postgres: {str(error).strip().splitlines()[0]}") from error
        self._published_columns[where] = (
            list(target.columns)
            if existing is None
            else [
                *existing,
                *[c for c in target.columns if c.name not in {e.name for e in existing}],
            ]
        )
        return content

    def _evolve(self, target: Target, existing: list[Column] | None) -> None:
        """Create the published table, or add the target's new columns (nullable)."""
        published = sql.table(target.name, target.schema)
        if existing is None:
            self._ensure_schema(target.schema or self.warehouse.schema)
            self._run(sql.create_table(published, target.columns, flavor=POSTGRES))
            return
        known = {c.name for c in existing}
        for col in target.columns:
            if col.name not in known:
                self._run(sql.add_column(published, Column(col.name, col.type), POSTGRES))

    def _writes(self, target: Target, staging: str) -> list[str]:
        """The statements that write the staged rows as the target's write mode says, built
        once per target and staging slot."""
        published = sql.table(target.name, target.schema)
        source = pg.staged(staging)
        at, key = target.partition_column, target.unique_key
        insert = self._statement(
            ("insert", target.schema, target.name, target.columns, staging),
            lambda: sql.insert_from(published, target.columns, source, POSTGRES),
        )
        if target.write_mode is WriteMode.OVERWRITE:
            delete = self._statement(
                ("delete", target.schema, target.name, at, target.keyed),
                lambda: sql.delete_partition(published, at, target.keyed, POSTGRES),
            )
            return [delete, insert]
        if not key:
            if target.write_mode is WriteMode.MERGE:
                raise ValueError(f"{target.name}: a merge matches rows by a unique key; none given")
            return [insert]
        grain = None if target.keyed else _grain(target)
        if target.write_mode is WriteMode.MERGE:
            matched = self._statement(
                ("delete matched", target, staging),
                lambda: write_sql.delete_matched(
                    published, source, at, target.keyed, key, grain, POSTGRES
                ),
            )
            return [matched, insert]
        unmatched = self._statement(
            ("insert unmatched", target, staging),
            lambda: write_sql.insert_unmatched(
                published, target.columns, source, at, target.keyed, key, grain, POSTGRES
            ),
        )
        return [unmatched]

    def _refuse_republish(self, markers: Sequence[CommitMarker]) -> None:
        """Append without a unique key writes a partition once: one with a marker refuses."""
        for model in sorted({m.model for m in markers}):
            starts = sorted({m.partition_start for m in markers if m.model == model})
            statement = write_sql.published_starts(len(starts), POSTGRES)
            found = self._run(statement, [model, *starts]).fetchall()
            if found:
                raise EngineError(
                    f"{model}: append without a unique key publishes a partition once; "
                    f"{len(found)} of these partitions are published already, and appending "
                    "again would duplicate their rows"
                )

    def _content(
        self, target: Target, bounds: Mapping[str, Any], markers: Sequence[CommitMarker]
    ) -> dict[int, Checksum]:
        """What each marked partition holds now, read inside the publish's transaction."""
        published = sql.table(target.name, target.schema)
        names = [c.name for c in target.columns]
        grain = None if target.keyed else _grain(target)
        statement = self._statement(
            ("content", target),
            lambda: write_sql.partition_content(
                published, names, target.partition_column, grain, POSTGRES
            ),
        )
        rows = self._run(statement, bounds).fetchall()
        if target.keyed:
            # a key list's partition is a unit of its own: one marker, one row
            return {m.partition_start: Checksum(int(rows[0][0]), int(rows[0][1])) for m in markers}
        measured = {int(r[0]): Checksum(int(r[1]), int(r[2])) for r in rows if r[0] is not None}
        return {m.partition_start: measured.get(m.partition_start, Checksum(0, 0)) for m in markers}


def _grain(target: Target) -> str:
    if target.grain is None:
        raise ValueError(f"{target.name}: a {target.write_mode.value} by time needs the grain")
    return target.grain
