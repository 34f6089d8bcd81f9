"""Ledger table of validation gates."""

from __future__ import annotations

from tidegate.domain.gate import Gate
from tidegate.state.base import Event
from tidegate.state.codec import gate_from_row, gate_params
from tidegate.state.sqlite_versions import VersionTables


class GateTables(VersionTables):
    def record_gate(self, gate: Gate, event: Event) -> None:
        with self._tx() as con:
            con.execute(
                "INSERT INTO gates VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                gate_params(gate),
            )
            self._insert_event(con, event)

    def gates(self, model: str) -> list[Gate]:
        rows = self._all(
            # the ledger's own order: a gate's stamp may be backdated with --as-of
            "SELECT * FROM gates WHERE model = ? ORDER BY rowid",
            (model,),
        )
        return [gate_from_row(r) for r in rows]
