"""Ledger table of validation gates."""

from __future__ import annotations

import json
import sqlite3

from tidegate.domain.gate import Gate
from tidegate.state.base import Event
from tidegate.state.sqlite_versions import VersionTables


class GateTables(VersionTables):
    def record_gate(self, gate: Gate, event: Event) -> None:
        with self._tx() as con:
            con.execute(
                "INSERT INTO gates VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    gate.gate_id,
                    gate.model,
                    gate.version_id,
                    int(gate.passed),
                    int(gate.flaky),
                    gate.inputs,
                    json.dumps(list(gate.partitions)),
                    json.dumps(gate.report, sort_keys=True),
                    gate.actor,
                    gate.created_at,
                ),
            )
            self._insert_event(con, event)

    def gates(self, model: str) -> list[Gate]:
        rows = self._all(
            # the ledger's own order: a gate's stamp may be backdated with --as-of
            "SELECT * FROM gates WHERE model = ? ORDER BY rowid",
            (model,),
        )
        return [_gate(r) for r in rows]


def _gate(row: sqlite3.Row) -> Gate:
    return Gate(
        gate_id=row["gate_id"],
        model=row["model"],
        version_id=row["version_id"],
        passed=bool(row["passed"]),
        flaky=bool(row["flaky"]),
        inputs=row["inputs"],
        partitions=tuple(json.loads(row["partitions"])),
        report=json.loads(row["report"]),
        actor=row["actor"],
        created_at=row["created_at"],
    )
