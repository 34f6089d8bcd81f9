"""The PostgreSQL ledger's partitions read model: who published each partition, and summaries
of it."""

from __future__ import annotations

from typing import Any

from psycopg.rows import tuple_row

from tidegate.domain.run import PublishedPartition
from tidegate.state.codec import partition_from_row
from tidegate.state.folds import Segment, fold_segments
from tidegate.state.postgres_tables import PostgresTables

# Published partitions merged into intervals in SQL (gaps and islands), from either the
# partitions read model (one model, optionally one version) or one run's attempts.
ISLANDS = (
    "WITH chosen AS ("
    " SELECT partition_start, partition_end FROM partitions"
    " WHERE %(source)s::text = 'model' AND model = %(model)s"
    " AND partition_start >= %(start)s::bigint AND partition_start < %(end)s::bigint"
    " AND attempt_id IS NOT NULL"
    " AND (%(version)s::text IS NULL OR version_id = %(version)s)"
    " UNION ALL"
    " SELECT partition_start, partition_end FROM attempts"
    " WHERE %(source)s::text = 'run' AND run_id = %(run)s AND state = 'published'"
    " AND model = %(model)s"
    "), marked AS ("
    " SELECT partition_start, partition_end, CASE WHEN partition_start ="
    " lag(partition_end) OVER (ORDER BY partition_start) THEN 0 ELSE 1 END AS gap"
    " FROM chosen"
    "), islands AS ("
    " SELECT partition_start, partition_end,"
    " sum(gap) OVER (ORDER BY partition_start) AS island FROM marked"
    ") SELECT min(partition_start), max(partition_end) FROM islands"
    " GROUP BY island ORDER BY 1"
)

# Each partition in the state `status` counts it under (PartitionTables.segments).
STATES = (
    "SELECT partition_start, partition_end, version_id, CASE"
    " WHEN last_state IN ('pending', 'running', 'staged', 'audited') THEN 'running'"
    " WHEN last_state = 'failed' THEN 'failed'"
    " WHEN attempt_id IS NULL THEN last_state"
    " WHEN version_id IS NOT DISTINCT FROM %s THEN 'published' ELSE 'stale' END"
    " FROM partitions WHERE model = %s ORDER BY partition_start"
)

STREAM_ROWS = 10_000


class PartitionTables(PostgresTables):
    def partition(self, model: str, start: int) -> PublishedPartition | None:
        row = self._one(
            "SELECT * FROM partitions WHERE model = %s AND partition_start = %s", (model, start)
        )
        return partition_from_row(row) if row else None

    def partitions(self, model: str, start: int, end: int) -> list[PublishedPartition]:
        rows = self._all(
            "SELECT * FROM partitions WHERE model = %s AND partition_start >= %s "
            "AND partition_start < %s ORDER BY partition_start",
            (model, start, end),
        )
        return [partition_from_row(r) for r in rows]

    def _intervals(self, **params: Any) -> list[tuple[int, int]]:
        values = {"model": None, "start": None, "end": None, "version": None, "run": None}
        rows = self._all(ISLANDS, {**values, **params})
        return [(int(r[0]), int(r[1])) for r in rows]

    def published_intervals(
        self, model: str, start: int, end: int, version_id: str | None = None
    ) -> list[tuple[int, int]]:
        return self._intervals(
            source="model", model=model, start=start, end=end, version=version_id
        )

    def run_checkpoints(self, run_id: str, model: str) -> list[tuple[int, int]]:
        return self._intervals(source="run", run=run_id, model=model)

    def segments(
        self, model: str, active_version: str | None, limit: int = 1000
    ) -> tuple[dict[str, int], list[Segment]]:
        # Streamed through a server-side cursor in partition order and folded as SQLite's
        # are: constant memory over a long history. Counts cover every partition.
        with self._read_tx() as con:
            cursor = con.cursor(name="tidegate_segments", row_factory=tuple_row)
            cursor.itersize = STREAM_ROWS
            try:
                cursor.execute(STATES, (active_version, model))
                return fold_segments(cursor, limit)
            finally:
                cursor.close()

    def mean_publish_seconds(self, model: str) -> float | None:
        row = self._one(
            "SELECT sum(seconds) / sum(n) FROM ("
            " SELECT extract(epoch FROM max(ended_at)::timestamptz"
            "  - min(started_at)::timestamptz) AS seconds,"
            "  count(*) AS n FROM attempts WHERE model = %s AND state = 'published'"
            " GROUP BY run_id, batch ORDER BY max(ended_at) DESC LIMIT 50) AS recent",
            (model,),
        )
        return None if row is None or row[0] is None else float(row[0])

    def partition_counts(self, model: str, active_version: str | None) -> dict[str, int]:
        row = self._one(
            "SELECT "
            "count(*) FILTER (WHERE version_id IS NOT NULL "
            " AND version_id IS NOT DISTINCT FROM %(active)s), "
            "count(*) FILTER (WHERE version_id IS NOT NULL "
            " AND version_id IS DISTINCT FROM %(active)s), "
            "count(*) FILTER (WHERE last_state = 'failed'), "
            "count(*) FILTER (WHERE last_state IN ('pending', 'running', 'staged', 'audited')), "
            "count(*) FROM partitions WHERE model = %(model)s",
            {"active": active_version, "model": model},
        )
        values = [int(v or 0) for v in (row or [0, 0, 0, 0, 0])]
        keys = ("published", "stale", "failed", "running", "known")
        return dict(zip(keys, values, strict=True))
