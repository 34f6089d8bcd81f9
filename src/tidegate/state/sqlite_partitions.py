"""The partitions read model: who published each partition, and summaries of it."""

from __future__ import annotations

from typing import Any

from tidegate.domain.run import PublishedPartition
from tidegate.state.codec import partition_from_row
from tidegate.state.folds import Segment, fold_segments
from tidegate.state.sqlite_tables import SQLiteTables


class PartitionTables(SQLiteTables):
    # partitions ---------------------------------------------------------------------------
    def partition(self, model: str, start: int) -> PublishedPartition | None:
        row = self._one(
            "SELECT * FROM partitions WHERE model = ? AND partition_start = ?", (model, start)
        )
        return partition_from_row(row) if row else None

    def partitions(self, model: str, start: int, end: int) -> list[PublishedPartition]:
        rows = self._all(
            "SELECT * FROM partitions WHERE model = ? AND partition_start >= ? "
            "AND partition_start < ? ORDER BY partition_start",
            (model, start, end),
        )
        return [partition_from_row(r) for r in rows]

    # Published partitions merged into intervals in SQL (gaps and islands), from either the
    # partitions read model (one model, optionally one version) or one run's attempts.
    ISLANDS = (
        "WITH chosen AS ("
        " SELECT partition_start, partition_end FROM partitions"
        " WHERE :source = 'model' AND model = :model AND partition_start >= :start"
        " AND partition_start < :end AND attempt_id IS NOT NULL"
        " AND (:version IS NULL OR version_id = :version)"
        " UNION ALL"
        " SELECT partition_start, partition_end FROM attempts"
        " WHERE :source = 'run' AND run_id = :run AND state = 'published'"
        " AND model = :model"
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

    def _intervals(self, **params: Any) -> list[tuple[int, int]]:
        values = {"model": None, "start": None, "end": None, "version": None, "run": None}
        rows = self._all(self.ISLANDS, {**values, **params})
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
        # One streaming pass in partition order: constant memory, and faster in SQLite than
        # window functions over a long history. Counts cover every partition.
        with self._lock:
            cursor = self._con.execute(
                "SELECT partition_start, partition_end, version_id, CASE"
                " WHEN last_state IN ('pending', 'running', 'staged', 'audited') THEN 'running'"
                " WHEN last_state = 'failed' THEN 'failed'"
                " WHEN attempt_id IS NULL THEN last_state"
                " WHEN version_id IS ? THEN 'published' ELSE 'stale' END"
                " FROM partitions WHERE model = ? ORDER BY partition_start",
                (active_version, model),
            )
            return fold_segments(cursor, limit)

    def mean_publish_seconds(self, model: str) -> float | None:
        row = self._one(
            "SELECT sum(seconds) / sum(n) FROM ("
            " SELECT (julianday(max(ended_at)) - julianday(min(started_at))) * 86400 AS seconds,"
            "  count(*) AS n FROM attempts WHERE model = ? AND state = 'published'"
            " GROUP BY run_id, batch ORDER BY max(ended_at) DESC LIMIT 50)",
            (model,),
        )
        return None if row is None or row[0] is None else float(row[0])

    def partition_counts(self, model: str, active_version: str | None) -> dict[str, int]:
        row = self._one(
            "SELECT "
            "sum(version_id IS NOT NULL AND version_id IS ?), "
            "sum(version_id IS NOT NULL AND version_id IS NOT ?), "
            "sum(last_state = 'failed'), "
            "sum(last_state IN ('pending', 'running', 'staged', 'audited')), "
            "count(*) FROM partitions WHERE model = ?",
            (active_version, active_version, model),
        )
        values = [int(v or 0) for v in (row or [0, 0, 0, 0, 0])]
        keys = ("published", "stale", "failed", "running", "known")
        return dict(zip(keys, values, strict=True))
