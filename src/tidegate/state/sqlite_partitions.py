"""The partitions read model: who published each partition, and summaries of it."""

from __future__ import annotations

import sqlite3
from typing import Any

from tidegate.domain.attempt import AttemptState
from tidegate.domain.run import PublishedPartition
from tidegate.state.sqlite_tables import SQLiteTables


class PartitionTables(SQLiteTables):
    # partitions ---------------------------------------------------------------------------
    @staticmethod
    def _partition(row: sqlite3.Row) -> PublishedPartition:
        return PublishedPartition(
            model=row["model"],
            grain=row["grain"],
            partition_start=row["partition_start"],
            partition_end=row["partition_end"],
            version_id=row["version_id"],
            run_id=row["run_id"],
            attempt_id=row["attempt_id"],
            rows=row["row_count"],
            checksum=row["checksum"],
            published_at=row["published_at"],
            last_attempt_id=row["last_attempt_id"],
            last_state=AttemptState(row["last_state"]),
            last_error=row["last_error"],
        )

    def partition(self, model: str, start: int) -> PublishedPartition | None:
        row = self._one(
            "SELECT * FROM partitions WHERE model = ? AND partition_start = ?", (model, start)
        )
        return self._partition(row) if row else None

    def partitions(self, model: str, start: int, end: int) -> list[PublishedPartition]:
        rows = self._all(
            "SELECT * FROM partitions WHERE model = ? AND partition_start >= ? "
            "AND partition_start < ? ORDER BY partition_start",
            (model, start, end),
        )
        return [self._partition(r) for r in rows]

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
    ) -> tuple[dict[str, int], list[tuple[str, str | None, int, int, int]]]:
        # One streaming pass in partition order: constant memory, and faster in SQLite than
        # window functions over a long history. Counts cover every partition.
        counts = dict.fromkeys(("published", "stale", "failed", "running", "known"), 0)
        found: list[list[Any]] = []
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
            for start, end, version, state in cursor:
                counts["known"] += 1
                if state in counts:
                    counts[state] += 1
                last = found[-1] if found else None
                if last and last[4] == start and last[0] == state and last[1] == version:
                    last[2] += 1
                    last[4] = end
                    continue
                if len(found) < limit:
                    found.append([state, version, 1, start, end])
        return counts, [(str(a), b, int(c), int(d), int(e)) for a, b, c, d, e in found]

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
