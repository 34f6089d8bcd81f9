"""Ledger table of the jobs command models ran, per attempt, shared by both stores."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tidegate.domain.command import CommandRecord
from tidegate.state.ledger_tables import LedgerTables

UPSERT_COMMAND = (
    "INSERT INTO attempt_commands (attempt_id, command, environment, pid, exit_code, "
    "duration_ms, stderr_tail, started_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (attempt_id) DO UPDATE SET command = excluded.command, "
    "environment = excluded.environment, pid = excluded.pid, exit_code = excluded.exit_code, "
    "duration_ms = excluded.duration_ms, stderr_tail = excluded.stderr_tail, "
    "started_at = excluded.started_at, ended_at = excluded.ended_at"
)


class CommandTables(LedgerTables):
    def record_command(self, attempt_ids: Sequence[str], record: CommandRecord) -> None:
        values = (
            json.dumps(list(record.command)),
            json.dumps(dict(record.environment), sort_keys=True),
            record.pid,
            record.exit_code,
            record.duration_ms,
            record.stderr_tail,
            record.started_at,
            record.ended_at,
        )
        with self._tx() as con:
            con.executemany(UPSERT_COMMAND, [(attempt_id, *values) for attempt_id in attempt_ids])

    def command(self, attempt_id: str) -> CommandRecord | None:
        row = self._one("SELECT * FROM attempt_commands WHERE attempt_id = ?", (attempt_id,))
        return None if row is None else _record(row)

    def unfinished_commands(self) -> dict[str, CommandRecord]:
        rows = self._all("SELECT * FROM attempt_commands WHERE ended_at IS NULL")
        return {row["attempt_id"]: _record(row) for row in rows}

    def end_commands(self, attempt_ids: Sequence[str], at: str) -> None:
        with self._tx() as con:
            con.executemany(
                "UPDATE attempt_commands SET ended_at = ? WHERE attempt_id = ?",
                [(at, attempt_id) for attempt_id in attempt_ids],
            )


def _record(row: Any) -> CommandRecord:
    return CommandRecord(
        command=tuple(json.loads(row["command"])),
        environment=json.loads(row["environment"]),
        started_at=row["started_at"],
        pid=row["pid"],
        exit_code=row["exit_code"],
        duration_ms=row["duration_ms"],
        stderr_tail=row["stderr_tail"],
        ended_at=row["ended_at"],
    )
