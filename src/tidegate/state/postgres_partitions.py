"""PostgreSQL's part of the partitions read model (the rest is ledger_partitions): segments
through a server-side cursor, and publish times by epoch."""

from __future__ import annotations

from psycopg.rows import tuple_row

from tidegate.state import ledger_partitions
from tidegate.state.folds import Segment, fold_segments
from tidegate.state.postgres_tables import PostgresTables

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


class PartitionTables(ledger_partitions.PartitionTables, PostgresTables):
    def segments(
        self, model: str, active_version: str | None, limit: int = 1000
    ) -> tuple[dict[str, int], list[Segment]]:
        # Streamed through a server-side cursor in partition order and folded as SQLite's
        # are: constant memory over a long history. Counts cover every partition.
        with self._read_tx() as con:
            cursor = con.raw.cursor(name="tidegate_segments", row_factory=tuple_row)
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
