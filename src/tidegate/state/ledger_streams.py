"""Ledger table of stream jobs (`streams`), shared by both stores: which version of a stream
model runs, in which state, from which restore point, under which supervisor."""

from __future__ import annotations

from typing import Any

from tidegate.domain.stream import StreamRecord, StreamState
from tidegate.state.base import Event
from tidegate.state.ledger_tables import LedgerTables
from tidegate.state.ledger_versions import insert_event

UPSERT_STREAM = (
    "INSERT INTO streams (model, version_id, state, job_id, restored_from, savepoint, "
    "checkpoint, checkpoints, supervisor_pid, supervisor_host, heartbeat_at, updated_at, "
    "previous_version_id, address) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (model) DO UPDATE SET version_id = excluded.version_id, "
    "state = excluded.state, job_id = excluded.job_id, restored_from = excluded.restored_from, "
    "savepoint = excluded.savepoint, checkpoint = excluded.checkpoint, "
    "checkpoints = excluded.checkpoints, supervisor_pid = excluded.supervisor_pid, "
    "supervisor_host = excluded.supervisor_host, heartbeat_at = excluded.heartbeat_at, "
    "updated_at = excluded.updated_at, previous_version_id = excluded.previous_version_id, "
    "address = excluded.address"
)


class StreamTables(LedgerTables):
    def save_stream(self, record: StreamRecord, event: Event | None = None) -> None:
        """Write the stream's row, and the history event of the change when there is one, in
        one transaction."""
        with self._tx() as con:
            con.execute(UPSERT_STREAM, _values(record))
            if event is not None:
                insert_event(con, event)

    def stream(self, model: str) -> StreamRecord | None:
        row = self._one("SELECT * FROM streams WHERE model = ?", (model,))
        return None if row is None else _record(row)

    def streams(self) -> list[StreamRecord]:
        return [_record(row) for row in self._all("SELECT * FROM streams ORDER BY model")]


def _values(record: StreamRecord) -> tuple[Any, ...]:
    return (
        record.model,
        record.version_id,
        record.state.value,
        record.job_id,
        record.restored_from,
        record.savepoint,
        record.checkpoint,
        record.checkpoints,
        record.supervisor_pid,
        record.supervisor_host,
        record.heartbeat_at,
        record.updated_at,
        record.previous_version_id,
        record.address,
    )


def _record(row: Any) -> StreamRecord:
    return StreamRecord(
        model=row["model"],
        version_id=row["version_id"],
        state=StreamState(row["state"]),
        job_id=row["job_id"],
        restored_from=row["restored_from"],
        savepoint=row["savepoint"],
        checkpoint=row["checkpoint"],
        checkpoints=int(row["checkpoints"]),
        supervisor_pid=row["supervisor_pid"],
        supervisor_host=row["supervisor_host"],
        heartbeat_at=row["heartbeat_at"],
        updated_at=row["updated_at"],
        previous_version_id=row["previous_version_id"],
        address=row["address"],
    )
