"""Ledger table of cursor marks, shared by both stores: what each run of a cursor model saw
(its candidate and snapshot) and how far it went (its watermark, and why)."""

from __future__ import annotations

from typing import Any

from tidegate.domain.cursor import CursorMark, WatermarkRule
from tidegate.state.ledger_tables import LedgerTables


class CursorTables(LedgerTables):
    def record_cursor_mark(self, mark: CursorMark) -> None:
        with self._tx() as con:
            con.execute(
                "INSERT INTO cursor_marks (run_id, model, source_table, cursor_column, "
                "observed_at, candidate, snapshot, committed, watermark, rule, reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    mark.run_id,
                    mark.model,
                    mark.table,
                    mark.column,
                    mark.observed_at,
                    mark.candidate,
                    mark.snapshot,
                    mark.committed,
                    mark.watermark,
                    mark.rule.value,
                    mark.reason,
                ),
            )

    def cursor_marks(
        self, model: str, table: str, column: str, limit: int = 20
    ) -> list[CursorMark]:
        rows = self._all(
            "SELECT * FROM cursor_marks WHERE model = ? AND source_table = ? "
            "AND cursor_column = ? ORDER BY run_id DESC LIMIT ?",
            (model, table, column, limit),
        )
        return [_mark(r) for r in rows]

    def run_cursor_marks(self, run_id: str) -> list[CursorMark]:
        rows = self._all("SELECT * FROM cursor_marks WHERE run_id = ? ORDER BY model", (run_id,))
        return [_mark(r) for r in rows]

    def newest_published(self, model: str) -> list[tuple[str, int, int]]:
        """Per version of `model` that published partitions: (version id, the furthest end it
        published, the ledger's sequence of its last published attempt), last published first.
        The sequence is the attempts' insertion order, not a timestamp: --as-of and the clock
        do not reorder it."""
        rows = self._all(
            "SELECT p.version_id, max(p.partition_end), max(a.rowid) "
            "FROM partitions AS p JOIN attempts AS a ON a.attempt_id = p.attempt_id "
            "WHERE p.model = ? AND p.attempt_id IS NOT NULL "
            "GROUP BY p.version_id ORDER BY max(a.rowid) DESC",
            (model,),
        )
        return [(str(r[0]), int(r[1]), int(r[2])) for r in rows]


def _mark(row: Any) -> CursorMark:
    return CursorMark(
        run_id=row["run_id"],
        model=row["model"],
        table=row["source_table"],
        column=row["cursor_column"],
        observed_at=row["observed_at"],
        candidate=_int(row["candidate"]),
        snapshot=row["snapshot"],
        committed=_int(row["committed"]),
        watermark=_int(row["watermark"]),
        rule=WatermarkRule(row["rule"]),
        reason=row["reason"],
    )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
