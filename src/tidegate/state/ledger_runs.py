"""Ledger table of runs, shared by both stores: requests, their plans, stop requests and
outcomes."""

from __future__ import annotations

from collections.abc import Sequence

from tidegate.domain.attempt import RunStatus
from tidegate.domain.run import Run
from tidegate.state.base import Event
from tidegate.state.codec import run_from_row, run_params
from tidegate.state.ledger_tables import LedgerTables
from tidegate.state.ledger_versions import insert_event


class RunTables(LedgerTables):
    def create_run(self, run: Run) -> None:
        with self._tx() as con:
            con.execute(
                "INSERT INTO runs (run_id, kind, models, partitions, params, requester, status, "
                "reason, pid, started_at, ended_at, plan, plan_hash, distributed) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                run_params(run),
            )

    def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        reason: str | None,
        at: str,
        trigger: str | None = None,
        events: Sequence[Event] = (),
    ) -> None:
        with self._tx() as con:
            con.execute(
                "UPDATE runs SET status = ?, reason = ?, ended_at = ?, trigger = ? "
                "WHERE run_id = ?",
                (status.value, reason, at, trigger, run_id),
            )
            for event in events:
                insert_event(con, event)

    def reopen_run(self, run_id: str, pid: int) -> None:
        with self._tx() as con:
            con.execute(
                "UPDATE runs SET status = 'running', reason = NULL, ended_at = NULL, "
                "trigger = NULL, stop_requested_at = NULL, pid = ? WHERE run_id = ?",
                (pid, run_id),
            )

    def request_stop(self, run_id: str, at: str) -> None:
        with self._tx() as con:
            con.execute(
                "UPDATE runs SET stop_requested_at = coalesce(stop_requested_at, ?) "
                "WHERE run_id = ?",
                (at, run_id),
            )

    def stop_requested(self, run_id: str) -> bool:
        row = self._one("SELECT stop_requested_at FROM runs WHERE run_id = ?", (run_id,))
        return bool(row and row[0])

    def runs(self, kind: str | None = None, limit: int = 50) -> list[Run]:
        rows = self._all(
            "SELECT * FROM runs WHERE CAST(:kind AS TEXT) IS NULL OR kind = :kind "
            "ORDER BY run_id DESC LIMIT :limit",
            {"kind": kind, "limit": limit},
        )
        return [run_from_row(r) for r in rows]

    def get_run(self, run_id: str) -> Run | None:
        row = self._one("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        return run_from_row(row) if row else None

    def live_runs(self) -> list[Run]:
        rows = self._all("SELECT * FROM runs WHERE status = 'running' ORDER BY run_id")
        return [run_from_row(r) for r in rows]

    def last_run(self, model: str) -> Run | None:
        row = self._one(
            "SELECT runs.* FROM runs JOIN attempts ON attempts.run_id = runs.run_id "
            "WHERE attempts.model = ? ORDER BY runs.run_id DESC LIMIT 1",
            (model,),
        )
        return run_from_row(row) if row else None
