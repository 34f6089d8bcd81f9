"""PostgreSQL ledger table of runs: requests, their plans, stop requests and outcomes."""

from __future__ import annotations

from tidegate.domain.attempt import RunStatus
from tidegate.domain.run import Run
from tidegate.state.codec import run_from_row, run_params
from tidegate.state.postgres_tables import PostgresTables


class RunTables(PostgresTables):
    def create_run(self, run: Run) -> None:
        with self._tx() as con:
            con.execute(
                "INSERT INTO runs (run_id, kind, models, partitions, params, requester, status, "
                "reason, pid, started_at, ended_at, plan, plan_hash) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                run_params(run),
            )

    def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        reason: str | None,
        at: str,
        trigger: str | None = None,
    ) -> None:
        with self._tx() as con:
            con.execute(
                "UPDATE runs SET status = %s, reason = %s, ended_at = %s, trigger = %s "
                "WHERE run_id = %s",
                (status.value, reason, at, trigger, run_id),
            )

    def reopen_run(self, run_id: str, pid: int) -> None:
        with self._tx() as con:
            con.execute(
                "UPDATE runs SET status = 'running', reason = NULL, ended_at = NULL, "
                "trigger = NULL, stop_requested_at = NULL, pid = %s WHERE run_id = %s",
                (pid, run_id),
            )

    def request_stop(self, run_id: str, at: str) -> None:
        with self._tx() as con:
            con.execute(
                "UPDATE runs SET stop_requested_at = coalesce(stop_requested_at, %s) "
                "WHERE run_id = %s",
                (at, run_id),
            )

    def stop_requested(self, run_id: str) -> bool:
        row = self._one("SELECT stop_requested_at FROM runs WHERE run_id = %s", (run_id,))
        return bool(row and row[0])

    def runs(self, kind: str | None = None, limit: int = 50) -> list[Run]:
        rows = self._all(
            "SELECT * FROM runs WHERE %(kind)s::text IS NULL OR kind = %(kind)s "
            "ORDER BY run_id DESC LIMIT %(limit)s",
            {"kind": kind, "limit": limit},
        )
        return [run_from_row(r) for r in rows]

    def get_run(self, run_id: str) -> Run | None:
        row = self._one("SELECT * FROM runs WHERE run_id = %s", (run_id,))
        return run_from_row(row) if row else None

    def live_runs(self) -> list[Run]:
        rows = self._all("SELECT * FROM runs WHERE status = 'running' ORDER BY run_id")
        return [run_from_row(r) for r in rows]

    def last_run(self, model: str) -> Run | None:
        row = self._one(
            "SELECT runs.* FROM runs JOIN attempts ON attempts.run_id = runs.run_id "
            "WHERE attempts.model = %s ORDER BY runs.run_id DESC LIMIT 1",
            (model,),
        )
        return run_from_row(row) if row else None
