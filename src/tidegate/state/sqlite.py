"""The embedded ledger: SQLite in WAL mode, with numbered schema migrations."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from tidegate.domain.attempt import AttemptState, IllegalTransition, RunStatus, predecessors
from tidegate.domain.checks import CheckResult
from tidegate.domain.errors import StateStoreError
from tidegate.domain.model import Severity, Version
from tidegate.domain.reconciliation import ReconciliationResult
from tidegate.domain.run import Attempt, Audit, Input, PublishedPartition, Run
from tidegate.state.base import Event, ModelState
from tidegate.state.codec import version_from_row, version_row

BUSY_TIMEOUT_MS = 30_000


def migrations() -> list[tuple[int, str]]:
    """Numbered migration scripts shipped with tidegate, in order."""
    folder = resources.files("tidegate.state") / "migrations"
    found = [
        (int(entry.name.split("_", 1)[0]), entry.read_text())
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    ]
    return sorted(found)


SCHEMA_VERSION = max(number for number, _ in migrations())


class SQLiteStateStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        # One connection shared by the coordinator and worker threads, one statement at a time.
        self._lock = threading.RLock()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = sqlite3.connect(
                path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            self._con.row_factory = sqlite3.Row
            self._con.execute("PRAGMA journal_mode = WAL")
            self._con.execute("PRAGMA synchronous = NORMAL")
            self._con.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.DatabaseError as error:
            raise StateStoreError(
                f"state store {path} is unreadable ({error}); restore it from a backup or move "
                "it aside — tidegate rebuilds nothing silently"
            ) from None

    def _migrate(self) -> None:
        self._con.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        )
        row = self._con.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
        current = int(row.fetchone()[0])
        if current > SCHEMA_VERSION:
            raise StateStoreError(
                f"state store {self.path} has schema v{current}, newer than this tidegate "
                f"supports (v{SCHEMA_VERSION}); upgrade tidegate"
            )
        for number, script in migrations():
            if number <= current:
                continue
            with self._tx() as con:
                for statement in script.split(";\n"):
                    if statement.strip():
                        con.execute(statement)
                con.execute("INSERT INTO schema_migrations (version) VALUES (?)", (number,))

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._con.execute("BEGIN IMMEDIATE")
            try:
                yield self._con
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            self._con.execute("COMMIT")

    def _all(self, query: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._con.execute(query, params).fetchall())

    def _one(self, query: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        with self._lock:
            row: sqlite3.Row | None = self._con.execute(query, params).fetchone()
        return row

    # versions ---------------------------------------------------------------------------
    def save_version(self, version: Version) -> Version:
        with self._tx() as con:
            existing = con.execute(
                "SELECT * FROM versions WHERE model = ? AND fingerprint = ?",
                (version.model, version.fingerprint),
            ).fetchone()
            if existing is not None:
                return version_from_row(existing)
            con.execute(
                "INSERT INTO versions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                version_row(version),
            )
        return version

    def find_version(self, model: str, fingerprint: str) -> Version | None:
        row = self._one(
            "SELECT * FROM versions WHERE model = ? AND fingerprint = ?", (model, fingerprint)
        )
        return version_from_row(row) if row else None

    def get_version(self, version_id: str) -> Version | None:
        row = self._one("SELECT * FROM versions WHERE version_id = ?", (version_id,))
        return version_from_row(row) if row else None

    def resolve_version(self, model: str, ref: str) -> Version | None:
        if ref[:1] in ("v", "V") and ref[1:].isdigit():
            row = self._one(
                "SELECT * FROM versions WHERE model = ? AND seq = ?", (model, int(ref[1:]))
            )
            return version_from_row(row) if row else None
        rows = self._all(
            "SELECT * FROM versions WHERE model = ? AND substr(version_id, 1, ?) = ?",
            (model, len(ref), ref),
        )
        return version_from_row(rows[0]) if len(rows) == 1 else None

    def active_version(self, model: str) -> Version | None:
        row = self._one(
            "SELECT versions.* FROM model_state JOIN versions "
            "ON versions.version_id = model_state.active_version WHERE model_state.model = ?",
            (model,),
        )
        return version_from_row(row) if row else None

    def versions(self, model: str) -> list[Version]:
        rows = self._all("SELECT * FROM versions WHERE model = ? ORDER BY seq", (model,))
        return [version_from_row(r) for r in rows]

    def next_seq(self, model: str) -> int:
        row = self._one("SELECT coalesce(max(seq), 0) + 1 FROM versions WHERE model = ?", (model,))
        return int(row[0]) if row else 1

    # deploys and history -------------------------------------------------------------------
    @staticmethod
    def _model_state(row: sqlite3.Row) -> ModelState:
        return ModelState(
            row["model"],
            row["active_version"],
            row["previous_version"],
            bool(row["paused"]),
            row["deployed_at"],
        )

    def model_state(self, model: str) -> ModelState | None:
        row = self._one("SELECT * FROM model_state WHERE model = ?", (model,))
        return self._model_state(row) if row else None

    def model_states(self) -> list[ModelState]:
        return [self._model_state(r) for r in self._all("SELECT * FROM model_state ORDER BY model")]

    def activate(self, model: str, version_id: str, at: str, event: Event) -> None:
        with self._tx() as con:
            con.execute(
                "INSERT INTO model_state (model, active_version, deployed_at) VALUES (?, ?, ?) "
                "ON CONFLICT (model) DO UPDATE SET previous_version = CASE "
                "WHEN model_state.active_version = excluded.active_version "
                "THEN model_state.previous_version ELSE model_state.active_version END, "
                "active_version = excluded.active_version, deployed_at = excluded.deployed_at",
                (model, version_id, at),
            )
            self._insert_event(con, event)

    @staticmethod
    def _insert_event(con: sqlite3.Connection, event: Event) -> None:
        con.execute(
            "INSERT INTO events (model, kind, version_id, run_id, actor, reason, at, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                event.model,
                event.kind,
                event.version_id,
                event.run_id,
                event.actor,
                event.reason,
                event.at,
                json.dumps(event.detail or {}, sort_keys=True),
            ),
        )

    def record_event(self, event: Event) -> None:
        with self._tx() as con:
            self._insert_event(con, event)

    def events(self, model: str) -> list[Event]:
        rows = self._all("SELECT * FROM events WHERE model = ? ORDER BY event_id", (model,))
        return [
            Event(
                kind=r["kind"],
                actor=r["actor"],
                at=r["at"],
                model=r["model"],
                version_id=r["version_id"],
                run_id=r["run_id"],
                reason=r["reason"],
                detail=json.loads(r["detail"]),
            )
            for r in rows
        ]

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

    # attempts -----------------------------------------------------------------------------
    def create_attempt(self, attempt: Attempt) -> None:
        self.create_attempts([attempt])

    def create_attempts(self, attempts: Sequence[Attempt], batch: int | None = None) -> None:
        with self._tx() as con:
            con.executemany(
                "INSERT INTO attempts (attempt_id, run_id, model, grain, partition_start, "
                "partition_end, version_id, state, started_at, batch) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        a.attempt_id,
                        a.run_id,
                        a.model,
                        a.grain,
                        a.partition_start,
                        a.partition_end,
                        a.version_id,
                        a.state.value,
                        a.started_at,
                        batch,
                    )
                    for a in attempts
                ],
            )
            con.executemany(
                "INSERT INTO partitions (model, grain, partition_start, partition_end, "
                "last_attempt_id, last_state) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (model, partition_start) DO UPDATE SET "
                "last_attempt_id = excluded.last_attempt_id, last_state = excluded.last_state, "
                "last_error = NULL",
                [
                    (
                        a.model,
                        a.grain,
                        a.partition_start,
                        a.partition_end,
                        a.attempt_id,
                        a.state.value,
                    )
                    for a in attempts
                ],
            )

    def move_attempt(
        self,
        attempt_id: str,
        state: AttemptState,
        at: str,
        rows: int | None = None,
        checksum: str | None = None,
        error: str | None = None,
    ) -> None:
        self.move_attempts([(attempt_id, rows, checksum, error)], state, at)

    def move_attempts(
        self,
        moves: Sequence[tuple[str, int | None, str | None, str | None]],
        state: AttemptState,
        at: str,
    ) -> None:
        """(attempt_id, rows, checksum, error) for each attempt moved to `state`."""
        allowed = sorted(s.value for s in predecessors(state))
        ended = at if state.terminal else None
        with self._tx() as con:
            for attempt_id, rows, checksum, error in moves:
                moved = con.execute(
                    "UPDATE attempts SET state = ?, ended_at = coalesce(?, ended_at), "
                    "row_count = coalesce(?, row_count), checksum = coalesce(?, checksum), "
                    "error = coalesce(?, error) WHERE attempt_id = ? "
                    "AND state IN (SELECT value FROM json_each(?))",
                    (state.value, ended, rows, checksum, error, attempt_id, json.dumps(allowed)),
                )
                if moved.rowcount != 1:
                    raise IllegalTransition(
                        f"attempt {attempt_id} cannot move to {state.value} from its state"
                    )
                con.execute(
                    "UPDATE partitions SET last_state = ?, last_error = ? "
                    "WHERE last_attempt_id = ?",
                    (state.value, error, attempt_id),
                )

    def publish(self, attempt_id: str, at: str) -> None:
        self.publish_many([attempt_id], at)

    def publish_many(self, attempt_ids: Sequence[str], at: str) -> None:
        with self._tx() as con:
            for attempt_id in attempt_ids:
                self._publish_one(con, attempt_id, at)

    @staticmethod
    def _publish_one(con: sqlite3.Connection, attempt_id: str, at: str) -> None:
        moved = con.execute(
            "UPDATE attempts SET state = 'published', ended_at = ? "
            "WHERE attempt_id = ? AND state = 'audited'",
            (at, attempt_id),
        )
        if moved.rowcount != 1:
            raise IllegalTransition(f"attempt {attempt_id} is not audited; it cannot publish")
        con.execute(
            "UPDATE partitions SET version_id = a.version_id, run_id = a.run_id, "
            "attempt_id = a.attempt_id, row_count = a.row_count, checksum = a.checksum, "
            "published_at = ?, last_state = CASE WHEN last_attempt_id = a.attempt_id "
            "THEN 'published' ELSE last_state END "
            "FROM (SELECT * FROM attempts WHERE attempt_id = ?) AS a "
            "WHERE partitions.model = a.model "
            "AND partitions.partition_start = a.partition_start",
            (at, attempt_id),
        )

    def record_checks(self, attempt_id: str, results: Sequence[CheckResult]) -> None:
        with self._tx() as con:
            con.executemany(
                "INSERT OR REPLACE INTO check_results VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        attempt_id,
                        r.name,
                        r.kind,
                        r.severity.value,
                        int(r.passed),
                        r.measured,
                        r.message,
                    )
                    for r in results
                ],
            )

    def record_audits(self, audits: Sequence[Audit], at: str) -> None:
        """Checks, reconciliations, rows and checksum of staged attempts; moves them to audited."""
        with self._tx() as con:
            for audit in audits:
                moved = con.execute(
                    "UPDATE attempts SET state = 'audited', row_count = ?, checksum = ? "
                    "WHERE attempt_id = ? AND state = 'staged'",
                    (audit.rows, audit.checksum, audit.attempt_id),
                )
                if moved.rowcount != 1:
                    raise IllegalTransition(f"attempt {audit.attempt_id} is not staged")
                con.execute(
                    "UPDATE partitions SET last_state = 'audited' WHERE last_attempt_id = ?",
                    (audit.attempt_id,),
                )
                con.executemany(
                    "INSERT OR REPLACE INTO check_results VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            audit.attempt_id,
                            r.name,
                            r.kind,
                            r.severity.value,
                            int(r.passed),
                            r.measured,
                            r.message,
                        )
                        for r in audit.checks
                    ],
                )
                con.executemany(
                    "INSERT OR REPLACE INTO reconciliations VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (
                            audit.attempt_id,
                            r.name,
                            r.source_value,
                            r.target_value,
                            r.tolerance,
                            int(r.passed),
                        )
                        for r in audit.reconciliations
                    ],
                )

    def reconciliations(self, attempt_id: str) -> list[ReconciliationResult]:
        rows = self._all(
            "SELECT * FROM reconciliations WHERE attempt_id = ? ORDER BY rowid", (attempt_id,)
        )
        return [
            ReconciliationResult(
                r["name"], r["source_value"], r["target_value"], r["tolerance"], bool(r["passed"])
            )
            for r in rows
        ]

    def record_inputs(self, attempt_id: str, inputs: Sequence[Input]) -> None:
        self.record_inputs_many({attempt_id: inputs})

    def record_inputs_many(self, inputs: Mapping[str, Sequence[Input]]) -> None:
        with self._tx() as con:
            con.executemany(
                "INSERT OR REPLACE INTO attempt_inputs VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        attempt_id,
                        i.upstream,
                        i.kind,
                        i.range_start,
                        i.range_end,
                        i.fingerprint,
                        json.dumps(list(i.upstream_attempts)),
                    )
                    for attempt_id, read in inputs.items()
                    for i in read
                ],
            )

    @staticmethod
    def _attempt(row: sqlite3.Row) -> Attempt:
        return Attempt(
            attempt_id=row["attempt_id"],
            run_id=row["run_id"],
            model=row["model"],
            grain=row["grain"],
            partition_start=row["partition_start"],
            partition_end=row["partition_end"],
            version_id=row["version_id"],
            state=AttemptState(row["state"]),
            started_at=row["started_at"],
            ended_at=row["ended_at"],
            rows=row["row_count"],
            checksum=row["checksum"],
            error=row["error"],
            batch=row["batch"],
        )

    def get_attempt(self, attempt_id: str) -> Attempt | None:
        row = self._one("SELECT * FROM attempts WHERE attempt_id = ?", (attempt_id,))
        return self._attempt(row) if row else None

    def live_attempts(self) -> list[Attempt]:
        rows = self._all(
            "SELECT * FROM attempts WHERE state IN ('pending', 'running', 'staged', 'audited') "
            "ORDER BY attempt_id"
        )
        return [self._attempt(r) for r in rows]

    def attempts_of_run(self, run_id: str) -> list[Attempt]:
        rows = self._all(
            "SELECT * FROM attempts WHERE run_id = ? ORDER BY model, partition_start", (run_id,)
        )
        return [self._attempt(r) for r in rows]

    def checks(self, attempt_id: str) -> list[CheckResult]:
        rows = self._all(
            "SELECT * FROM check_results WHERE attempt_id = ? ORDER BY rowid", (attempt_id,)
        )
        return [
            CheckResult(
                r["name"],
                r["kind"],
                Severity(r["severity"]),
                bool(r["passed"]),
                r["measured"],
                r["message"],
            )
            for r in rows
        ]

    def inputs(self, attempt_id: str) -> list[Input]:
        rows = self._all(
            "SELECT * FROM attempt_inputs WHERE attempt_id = ? ORDER BY upstream", (attempt_id,)
        )
        return [
            Input(
                r["upstream"],
                r["kind"],
                r["range_start"],
                r["range_end"],
                r["fingerprint"],
                tuple(json.loads(r["upstream_attempts"])),
            )
            for r in rows
        ]

    # partitions ---------------------------------------------------------------------------
    @staticmethod
    def _partition(row: sqlite3.Row) -> PublishedPartition:
        return PublishedPartition(
            model=row["model"],
            grain=row["grain"],
            partition_start=row["partition_start"],
            partition_end=row["partition_end"],
            version_id=row["version_id"],
            run_id=row["run_id"],
            attempt_id=row["attempt_id"],
            rows=row["row_count"],
            checksum=row["checksum"],
            published_at=row["published_at"],
            last_attempt_id=row["last_attempt_id"],
            last_state=AttemptState(row["last_state"]),
            last_error=row["last_error"],
        )

    def partition(self, model: str, start: int) -> PublishedPartition | None:
        row = self._one(
            "SELECT * FROM partitions WHERE model = ? AND partition_start = ?", (model, start)
        )
        return self._partition(row) if row else None

    def partitions(self, model: str, start: int, end: int) -> list[PublishedPartition]:
        rows = self._all(
            "SELECT * FROM partitions WHERE model = ? AND partition_start >= ? "
            "AND partition_start < ? ORDER BY partition_start",
            (model, start, end),
        )
        return [self._partition(r) for r in rows]

    # Published partitions merged into intervals in SQL (gaps and islands), from either the
    # partitions read model (one model, optionally one version) or one run's attempts.
    ISLANDS = (
        "WITH chosen AS ("
        " SELECT partition_start, partition_end FROM partitions"
        " WHERE :source = 'model' AND model = :model AND partition_start >= :start"
        " AND partition_start < :end AND attempt_id IS NOT NULL"
        " AND (:version IS NULL OR version_id = :version)"
        " UNION ALL"
        " SELECT partition_start, partition_end FROM attempts"
        " WHERE :source = 'run' AND run_id = :run AND state = 'published'"
        "), marked AS ("
        " SELECT partition_start, partition_end, CASE WHEN partition_start ="
        " lag(partition_end) OVER (ORDER BY partition_start) THEN 0 ELSE 1 END AS gap"
        " FROM chosen"
        "), islands AS ("
        " SELECT partition_start, partition_end,"
        " sum(gap) OVER (ORDER BY partition_start) AS island FROM marked"
        ") SELECT min(partition_start), max(partition_end) FROM islands"
        " GROUP BY island ORDER BY 1"
    )

    def _intervals(self, **params: Any) -> list[tuple[int, int]]:
        values = {"model": None, "start": None, "end": None, "version": None, "run": None}
        rows = self._all(self.ISLANDS, {**values, **params})
        return [(int(r[0]), int(r[1])) for r in rows]

    def published_intervals(
        self, model: str, start: int, end: int, version_id: str | None = None
    ) -> list[tuple[int, int]]:
        return self._intervals(
            source="model", model=model, start=start, end=end, version=version_id
        )

    def run_checkpoints(self, run_id: str) -> list[tuple[int, int]]:
        return self._intervals(source="run", run=run_id)

    def segments(
        self, model: str, active_version: str | None, limit: int = 1000
    ) -> tuple[dict[str, int], list[tuple[str, str | None, int, int, int]]]:
        # One streaming pass in partition order: constant memory, and faster in SQLite than
        # window functions over a long history. Counts cover every partition.
        counts = dict.fromkeys(("published", "stale", "failed", "running", "known"), 0)
        found: list[list[Any]] = []
        with self._lock:
            cursor = self._con.execute(
                "SELECT partition_start, partition_end, version_id, CASE"
                " WHEN last_state IN ('pending', 'running', 'staged', 'audited') THEN 'running'"
                " WHEN last_state = 'failed' THEN 'failed'"
                " WHEN attempt_id IS NULL THEN last_state"
                " WHEN version_id IS ? THEN 'published' ELSE 'stale' END"
                " FROM partitions WHERE model = ? ORDER BY partition_start",
                (active_version, model),
            )
            for start, end, version, state in cursor:
                counts["known"] += 1
                if state in counts:
                    counts[state] += 1
                last = found[-1] if found else None
                if last and last[4] == start and last[0] == state and last[1] == version:
                    last[2] += 1
                    last[4] = end
                    continue
                if len(found) < limit:
                    found.append([state, version, 1, start, end])
        return counts, [(str(a), b, int(c), int(d), int(e)) for a, b, c, d, e in found]

    def mean_publish_seconds(self, model: str) -> float | None:
        row = self._one(
            "SELECT sum(seconds) / sum(n) FROM ("
            " SELECT (julianday(max(ended_at)) - julianday(min(started_at))) * 86400 AS seconds,"
            "  count(*) AS n FROM attempts WHERE model = ? AND state = 'published'"
            " GROUP BY run_id, batch ORDER BY max(ended_at) DESC LIMIT 50)",
            (model,),
        )
        return None if row is None or row[0] is None else float(row[0])

    def partition_counts(self, model: str, active_version: str | None) -> dict[str, int]:
        row = self._one(
            "SELECT "
            "sum(version_id IS NOT NULL AND version_id IS ?), "
            "sum(version_id IS NOT NULL AND version_id IS NOT ?), "
            "sum(last_state = 'failed'), "
            "sum(last_state IN ('pending', 'running', 'staged', 'audited')), "
            "count(*) FROM partitions WHERE model = ?",
            (active_version, active_version, model),
        )
        values = [int(v or 0) for v in (row or [0, 0, 0, 0, 0])]
        keys = ("published", "stale", "failed", "running", "known")
        return dict(zip(keys, values, strict=True))

    def close(self) -> None:
        self._con.close()
