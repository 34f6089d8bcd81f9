"""The partitions read model, shared by both stores: who published each partition, and
summaries of it. Each store streams segments and measures publish times in its own way
(sqlite_partitions, postgres_partitions)."""

from __future__ import annotations

from typing import Any

from tidegate.domain.run import PublishedPartition
from tidegate.state.codec import partition_from_row
from tidegate.state.ledger_tables import LedgerTables

# Published partitions merged into intervals in SQL (gaps and islands), from either the
# partitions read model (one model, optionally one version) or one run's attempts.
ISLANDS = (
    "WITH chosen AS ("
    " SELECT partition_start, partition_end FROM partitions"
    " WHERE CAST(:source AS TEXT) = 'model' AND model = :model"
    " AND partition_start >= CAST(:start AS BIGINT) AND partition_start < CAST(:end AS BIGINT)"
    " AND attempt_id IS NOT NULL"
    " AND (CAST(:version AS TEXT) IS NULL OR version_id = :version)"
    " UNION ALL"
    " SELECT partition_start, partition_end FROM attempts"
    " WHERE CAST(:source AS TEXT) = 'run' AND run_id = :run AND state = 'published'"
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

# The end of the newest partition of a model published by a version before a moment: the index
# on (model, partition_start) walked back from it, not the model's whole history.
NEWEST_PUBLISHED = (
    "SELECT partition_end FROM partitions WHERE model = :model"
    " AND partition_start < CAST(:end AS BIGINT) AND attempt_id IS NOT NULL"
    " AND version_id = :version ORDER BY partition_start DESC LIMIT 1"
)

# How many partitions of a model are published by the active version, by another (stale),
# failed, running, and known at all.
COUNTS = (
    "SELECT "
    "count(CASE WHEN version_id = :active THEN 1 END), "
    "count(CASE WHEN CAST(:active AS TEXT) IS NULL OR version_id <> :active "
    " THEN version_id END), "
    "count(CASE WHEN last_state = 'failed' THEN 1 END), "
    "count(CASE WHEN last_state IN ('pending', 'running', 'staged', 'audited') THEN 1 END), "
    "count(*) FROM partitions WHERE model = :model"
)


class PartitionTables(LedgerTables):
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

    def newest_published_end(self, model: str, end: int, version_id: str) -> int | None:
        row = self._one(NEWEST_PUBLISHED, {"model": model, "end": end, "version": version_id})
        return None if row is None else int(row[0])

    def run_checkpoints(self, run_id: str, model: str) -> list[tuple[int, int]]:
        return self._intervals(source="run", run=run_id, model=model)

    def partition_counts(self, model: str, active_version: str | None) -> dict[str, int]:
        row = self._one(COUNTS, {"active": active_version, "model": model})
        values = [int(v or 0) for v in (row or [0, 0, 0, 0, 0])]
        keys = ("published", "stale", "failed", "running", "known")
        return dict(zip(keys, values, strict=True))
