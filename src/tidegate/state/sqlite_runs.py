"""Ledger table of runs: requests, their plans, stop requests and outcomes."""

from __future__ import annotations

import json
import sqlite3

from tidegate.domain.attempt import RunStatus
from tidegate.domain.run import Run
from tidegate.state.sqlite_tables import SQLiteTables


class RunTables(SQLiteTables):
    # runs ---------------------------------------------------------------------------------
    def create_run(self, run: Run) -> None:
        with self._tx() as con:
            con.execute(
                "INSERT INTO runs (run_id, kind, models, partitions, params, requester, status, "
                "reason, pid, started_at, ended_at, plan, plan_hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.run_id,
                    run.kind,
                    json.dumps(list(run.models)),
                    run.partitions,
                    json.dumps(run.params, sort_keys=True),
                    run.requester,
                    run.status.value,
                    run.reason,
                    run.pid,
                    run.started_at,
                    run.ended_at,
                    run.plan,
                    run.plan_hash,
                ),
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
                "UPDATE runs SET status = ?, reason = ?, ended_at = ?, trigger = ? "
                "WHERE run_id = ?",
                (status.value, reason, at, trigger, run_id),
            )

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
            "SELECT * FROM runs WHERE ? IS NULL OR kind = ? ORDER BY run_id DESC LIMIT ?",
            (kind, kind, limit),
        )
        return [self._run(r) for r in rows]

    @staticmethod
    def _run(row: sqlite3.Row) -> Run:
        return Run(
            run_id=row["run_id"],
            kind=row["kind"],
            models=tuple(json.loads(row["models"])),
            partitions=row["partitions"],
            requester=row["requester"],
            status=RunStatus(row["status"]),
            started_at=row["started_at"],
            params=json.loads(row["params"]),
            pid=row["pid"],
            reason=row["reason"],
            ended_at=row["ended_at"],
            plan=row["plan"],
            plan_hash=row["plan_hash"],
            trigger=row["trigger"],
            stop_requested_at=row["stop_requested_at"],
        )

    def get_run(self, run_id: str) -> Run | None:
        row = self._one("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        return self._run(row) if row else None

    def live_runs(self) -> list[Run]:
        rows = self._all("SELECT * FROM runs WHERE status = 'running' ORDER BY run_id")
        return [self._run(r) for r in rows]

    def last_run(self, model: str) -> Run | None:
        row = self._one(
            "SELECT runs.* FROM runs JOIN attempts USING (run_id) WHERE attempts.model = ? "
            "ORDER BY runs.run_id DESC LIMIT 1",
            (model,),
        )
        return self._run(row) if row else None
