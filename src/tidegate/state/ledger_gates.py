"""Ledger table of validation gates, shared by both stores."""

from __future__ import annotations

from tidegate.domain.gate import Gate
from tidegate.state.base import Event
from tidegate.state.codec import gate_from_row, gate_params
from tidegate.state.ledger_versions import VersionTables, insert_event


class GateTables(VersionTables):
    def record_gate(self, gate: Gate, event: Event) -> None:
        with self._tx() as con:
            con.execute(
                "INSERT INTO gates (gate_id, model, version_id, passed, flaky, inputs, "
                "partitions, report, actor, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                gate_params(gate),
            )
            insert_event(con, event)

    def gates(self, model: str) -> list[Gate]:
        rows = self._all(
            # the ledger's own order: a gate's stamp may be backdated with --as-of
            "SELECT * FROM gates WHERE model = ? ORDER BY rowid",
            (model,),
        )
        return [gate_from_row(r) for r in rows]
