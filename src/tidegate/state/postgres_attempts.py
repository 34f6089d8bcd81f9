"""PostgreSQL ledger tables of attempts: intent, state moves, checks, reconciliations, inputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from tidegate.domain.attempt import AttemptState, IllegalTransition, predecessors
from tidegate.domain.checks import CheckResult
from tidegate.domain.reconciliation import ReconciliationResult
from tidegate.domain.run import Attempt, Audit, Input
from tidegate.state.codec import (
    attempt_from_row,
    attempt_params,
    attempt_partition_params,
    check_from_row,
    check_params,
    input_from_row,
    input_params,
    reconciliation_from_row,
    reconciliation_params,
)
from tidegate.state.postgres_tables import PostgresTables
from tidegate.state.postgres_taints import hold_marks, settle_taints

# A result recorded again replaces the first and goes to the end of the order, as SQLite's
# INSERT OR REPLACE does (its rowid is new).
RECORD_CHECK = (
    "INSERT INTO check_results (attempt_id, name, kind, severity, passed, measured, message) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (attempt_id, name) DO UPDATE SET "
    "kind = excluded.kind, severity = excluded.severity, passed = excluded.passed, "
    "measured = excluded.measured, message = excluded.message, rowid = excluded.rowid"
)
RECORD_RECONCILIATION = (
    "INSERT INTO reconciliations (attempt_id, name, source_value, target_value, tolerance, "
    "passed) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (attempt_id, name) DO UPDATE SET "
    "source_value = excluded.source_value, target_value = excluded.target_value, "
    "tolerance = excluded.tolerance, passed = excluded.passed, rowid = excluded.rowid"
)
RECORD_INPUT = (
    "INSERT INTO attempt_inputs (attempt_id, upstream, kind, range_start, range_end, "
    "fingerprint, upstream_attempts) VALUES (%s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (attempt_id, upstream) DO UPDATE SET kind = excluded.kind, "
    "range_start = excluded.range_start, range_end = excluded.range_end, "
    "fingerprint = excluded.fingerprint, upstream_attempts = excluded.upstream_attempts"
)


class AttemptTables(PostgresTables):
    def create_attempt(self, attempt: Attempt) -> None:
        self.create_attempts([attempt])

    def create_attempts(self, attempts: Sequence[Attempt], batch: int | None = None) -> None:
        with self._tx() as con, con.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO attempts (attempt_id, run_id, model, grain, partition_start, "
                "partition_end, version_id, state, started_at, batch) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [attempt_params(a, batch) for a in attempts],
            )
            cursor.executemany(
                "INSERT INTO partitions (model, grain, partition_start, partition_end, "
                "last_attempt_id, last_state) VALUES (%s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (model, partition_start) DO UPDATE SET "
                "last_attempt_id = excluded.last_attempt_id, last_state = excluded.last_state, "
                "last_error = NULL",
                [attempt_partition_params(a) for a in attempts],
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
                # compare-and-set: a concurrent move of the same attempt is waited for, and
                # the state it left is the one checked
                moved = con.execute(
                    "UPDATE attempts SET state = %s, ended_at = coalesce(%s, ended_at), "
                    "row_count = coalesce(%s, row_count), checksum = coalesce(%s, checksum), "
                    "error = coalesce(%s, error) WHERE attempt_id = %s AND state = ANY(%s)",
                    (state.value, ended, rows, checksum, error, attempt_id, allowed),
                )
                if moved.rowcount != 1:
                    raise IllegalTransition(
                        f"attempt {attempt_id} cannot move to {state.value} from its state"
                    )
                con.execute(
                    "UPDATE partitions SET last_state = %s, last_error = %s "
                    "WHERE last_attempt_id = %s",
                    (state.value, error, attempt_id),
                )

    def publish(self, attempt_id: str, at: str) -> None:
        self.publish_many([attempt_id], at)

    def publish_many(self, attempt_ids: Sequence[str], at: str) -> None:
        with self._tx() as con:
            # shared with other publishes, exclusive of `taint`: see hold_marks
            hold_marks(con, exclusive=False)
            tainted = con.execute(
                "SELECT 1 FROM tainted_partitions WHERE cleared_at IS NULL LIMIT 1"
            ).fetchone()
            for attempt_id in attempt_ids:
                publish_one(con, attempt_id, at)
                if tainted:
                    settle_taints(con, attempt_id, at)

    def record_published_content(self, contents: Mapping[str, tuple[int, str]]) -> None:
        with self._tx() as con:
            for attempt_id, (rows, checksum) in contents.items():
                moved = con.execute(
                    "UPDATE attempts SET row_count = %s, checksum = %s "
                    "WHERE attempt_id = %s AND state = 'audited'",
                    (rows, checksum, attempt_id),
                )
                if moved.rowcount != 1:
                    raise IllegalTransition(
                        f"attempt {attempt_id} is not audited; its content cannot be recorded"
                    )

    def record_checks(self, attempt_id: str, results: Sequence[CheckResult]) -> None:
        with self._tx() as con, con.cursor() as cursor:
            cursor.executemany(RECORD_CHECK, [check_params(attempt_id, r) for r in results])

    def record_audits(self, audits: Sequence[Audit], at: str) -> None:
        """Checks, reconciliations, rows and checksum of staged attempts; moves them to audited."""
        with self._tx() as con, con.cursor() as cursor:
            for audit in audits:
                moved = cursor.execute(
                    "UPDATE attempts SET state = 'audited', row_count = %s, checksum = %s "
                    "WHERE attempt_id = %s AND state = 'staged'",
                    (audit.rows, audit.checksum, audit.attempt_id),
                )
                if moved.rowcount != 1:
                    raise IllegalTransition(f"attempt {audit.attempt_id} is not staged")
                cursor.execute(
                    "UPDATE partitions SET last_state = 'audited' WHERE last_attempt_id = %s",
                    (audit.attempt_id,),
                )
                cursor.executemany(
                    RECORD_CHECK, [check_params(audit.attempt_id, r) for r in audit.checks]
                )
                cursor.executemany(
                    RECORD_RECONCILIATION,
                    [reconciliation_params(audit.attempt_id, r) for r in audit.reconciliations],
                )

    def reconciliations(self, attempt_id: str) -> list[ReconciliationResult]:
        rows = self._all(
            "SELECT * FROM reconciliations WHERE attempt_id = %s ORDER BY rowid", (attempt_id,)
        )
        return [reconciliation_from_row(r) for r in rows]

    def record_inputs(self, attempt_id: str, inputs: Sequence[Input]) -> None:
        self.record_inputs_many({attempt_id: inputs})

    def record_inputs_many(self, inputs: Mapping[str, Sequence[Input]]) -> None:
        with self._tx() as con, con.cursor() as cursor:
            cursor.executemany(
                RECORD_INPUT,
                [input_params(attempt_id, i) for attempt_id, read in inputs.items() for i in read],
            )

    def get_attempt(self, attempt_id: str) -> Attempt | None:
        row = self._one("SELECT * FROM attempts WHERE attempt_id = %s", (attempt_id,))
        return attempt_from_row(row) if row else None

    def live_attempts(self) -> list[Attempt]:
        rows = self._all(
            "SELECT * FROM attempts WHERE state IN ('pending', 'running', 'staged', 'audited') "
            "ORDER BY attempt_id"
        )
        return [attempt_from_row(r) for r in rows]

    def attempts_of_run(self, run_id: str) -> list[Attempt]:
        rows = self._all(
            "SELECT * FROM attempts WHERE run_id = %s ORDER BY model, partition_start", (run_id,)
        )
        return [attempt_from_row(r) for r in rows]

    def checks(self, attempt_id: str) -> list[CheckResult]:
        rows = self._all(
            "SELECT * FROM check_results WHERE attempt_id = %s ORDER BY rowid", (attempt_id,)
        )
        return [check_from_row(r) for r in rows]

    def inputs(self, attempt_id: str) -> list[Input]:
        rows = self._all(
            "SELECT * FROM attempt_inputs WHERE attempt_id = %s ORDER BY upstream", (attempt_id,)
        )
        return [input_from_row(r) for r in rows]


def publish_one(con: psycopg.Connection[Any], attempt_id: str, at: str) -> None:
    moved = con.execute(
        "UPDATE attempts SET state = 'published', ended_at = %s "
        "WHERE attempt_id = %s AND state = 'audited'",
        (at, attempt_id),
    )
    if moved.rowcount != 1:
        raise IllegalTransition(f"attempt {attempt_id} is not audited; it cannot publish")
    con.execute(
        "UPDATE partitions SET version_id = a.version_id, run_id = a.run_id, "
        "attempt_id = a.attempt_id, row_count = a.row_count, checksum = a.checksum, "
        "published_at = %s, last_state = CASE WHEN partitions.last_attempt_id = a.attempt_id "
        "THEN 'published' ELSE partitions.last_state END "
        "FROM attempts AS a WHERE a.attempt_id = %s AND partitions.model = a.model "
        "AND partitions.partition_start = a.partition_start",
        (at, attempt_id),
    )
