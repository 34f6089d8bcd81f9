"""SQLite's part of the partitions read model (the rest is ledger_partitions): segments in
one streaming pass, and publish times by julianday."""

from __future__ import annotations

from tidegate.state import ledger_partitions
from tidegate.state.folds import Segment, fold_segments
from tidegate.state.sqlite_tables import SQLiteTables


class PartitionTables(ledger_partitions.PartitionTables, SQLiteTables):
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
