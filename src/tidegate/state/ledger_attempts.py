"""Ledger tables of attempts, shared by both stores: intent, state moves, checks,
reconciliations, inputs. What differs is each store's own part (sqlite_attempts,
postgres_attempts): the compare-and-set of a state move, and how a result recorded again
replaces the first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

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
from tidegate.state.ledger_taints import TaintTables, any_open_taint


class AttemptTables(TaintTables):
    """Publishing settles taints: the attempt tables build on the taint tables."""

    # Upserts of a check result, a reconciliation and an input: supplied by each store.
    RECORD_CHECK: ClassVar[str]
    RECORD_RECONCILIATION: ClassVar[str]
    RECORD_INPUT: ClassVar[str]

    if TYPE_CHECKING:  # each store's own compare-and-set (sqlite_attempts, postgres_attempts)

        def _move_attempt(self, con: Any, params: tuple[Any, ...], allowed: list[str]) -> int:
            """Compare-and-set one attempt's state (params: state, ended_at, rows, checksum,
            error, attempt_id) where its state is one of `allowed`; how many rows it moved."""

    def create_attempt(self, attempt: Attempt) -> None:
        self.create_attempts([attempt])

    def create_attempts(self, attempts: Sequence[Attempt], batch: int | None = None) -> None:
        with self._tx() as con:
            con.executemany(
                "INSERT INTO attempts (attempt_id, run_id, model, grain, partition_start, "
                "partition_end, version_id, state, started_at, batch) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [attempt_params(a, batch) for a in attempts],
            )
            con.executemany(
                "INSERT INTO partitions (model, grain, partition_start, partition_end, "
                "last_attempt_id, last_state) VALUES (?, ?, ?, ?, ?, ?) "
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
                moved = self._move_attempt(
                    con, (state.value, ended, rows, checksum, error, attempt_id), allowed
                )
                if moved != 1:
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
            self._hold_marks(con, exclusive=False)  # shared with other publishes
            tainted = any_open_taint(con)
            for attempt_id in attempt_ids:
                replaced = self._replaced_by(con, attempt_id)
                publish_one(con, attempt_id, at)
                if tainted:
                    self._settle_taints(con, attempt_id, at)
                if replaced is not None:
                    self._mark_stale(con, replaced, at)

    def record_published_content(self, contents: Mapping[str, tuple[int, str]]) -> None:
        with self._tx() as con:
            for attempt_id, (rows, checksum) in contents.items():
                moved = con.execute(
                    "UPDATE attempts SET row_count = ?, checksum = ? "
                    "WHERE attempt_id = ? AND state = 'audited'",
                    (rows, checksum, attempt_id),
                )
                if moved.rowcount != 1:
                    raise IllegalTransition(
                        f"attempt {attempt_id} is not audited; its content cannot be recorded"
                    )

    def record_checks(self, attempt_id: str, results: Sequence[CheckResult]) -> None:
        with self._tx() as con:
            con.executemany(self.RECORD_CHECK, [check_params(attempt_id, r) for r in results])

    def record_reconciliations(
        self, attempt_id: str, results: Sequence[ReconciliationResult]
    ) -> None:
        with self._tx() as con:
            con.executemany(
                self.RECORD_RECONCILIATION, [reconciliation_params(attempt_id, r) for r in results]
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
                    self.RECORD_CHECK, [check_params(audit.attempt_id, r) for r in audit.checks]
                )
                con.executemany(
                    self.RECORD_RECONCILIATION,
                    [reconciliation_params(audit.attempt_id, r) for r in audit.reconciliations],
                )

    def reconciliations(self, attempt_id: str) -> list[ReconciliationResult]:
        rows = self._all(
            "SELECT * FROM reconciliations WHERE attempt_id = ? ORDER BY rowid", (attempt_id,)
        )
        return [reconciliation_from_row(r) for r in rows]

    def record_inputs(self, attempt_id: str, inputs: Sequence[Input]) -> None:
        self.record_inputs_many({attempt_id: inputs})

    def record_inputs_many(self, inputs: Mapping[str, Sequence[Input]]) -> None:
        with self._tx() as con:
            con.executemany(
                self.RECORD_INPUT,
                [input_params(attempt_id, i) for attempt_id, read in inputs.items() for i in read],
            )

    def last_published_attempt(self, model: str) -> str | None:
        row = self._one(
            "SELECT max(attempt_id) FROM attempts WHERE model = ? AND state = 'published'",
            (model,),
        )
        return None if row is None or row[0] is None else str(row[0])

    def get_attempt(self, attempt_id: str) -> Attempt | None:
        row = self._one("SELECT * FROM attempts WHERE attempt_id = ?", (attempt_id,))
        return attempt_from_row(row) if row else None

    def live_attempts(self) -> list[Attempt]:
        rows = self._all(
            "SELECT * FROM attempts WHERE state IN ('pending', 'running', 'staged', 'audited') "
            "ORDER BY attempt_id"
        )
        return [attempt_from_row(r) for r in rows]

    def attempts_of_run(self, run_id: str) -> list[Attempt]:
        rows = self._all(
            "SELECT * FROM attempts WHERE run_id = ? ORDER BY model, partition_start", (run_id,)
        )
        return [attempt_from_row(r) for r in rows]

    def ended_attempts(self, run_id: str, since: str | None) -> list[Attempt]:
        """Attempts of a run that ended at or after `since` (all that ended: None), by end."""
        rows = self._all(
            "SELECT * FROM attempts WHERE run_id = :run AND ended_at IS NOT NULL "
            "AND (CAST(:since AS TEXT) IS NULL OR ended_at >= :since) "
            "ORDER BY ended_at, attempt_id",
            {"run": run_id, "since": since},
        )
        return [attempt_from_row(r) for r in rows]

    def checks(self, attempt_id: str) -> list[CheckResult]:
        rows = self._all(
            "SELECT * FROM check_results WHERE attempt_id = ? ORDER BY rowid", (attempt_id,)
        )
        return [check_from_row(r) for r in rows]

    def checks_of_run(self, run_id: str) -> dict[str, list[CheckResult]]:
        rows = self._all(
            "SELECT c.* FROM check_results c JOIN attempts a ON a.attempt_id = c.attempt_id "
            "WHERE a.run_id = ? ORDER BY c.rowid",
            (run_id,),
        )
        found: dict[str, list[CheckResult]] = {}
        for row in rows:
            found.setdefault(row["attempt_id"], []).append(check_from_row(row))
        return found

    def inputs(self, attempt_id: str) -> list[Input]:
        rows = self._all(
            "SELECT * FROM attempt_inputs WHERE attempt_id = ? ORDER BY upstream", (attempt_id,)
        )
        return [input_from_row(r) for r in rows]


def publish_one(con: Any, attempt_id: str, at: str) -> None:
    moved = con.execute(
        "UPDATE attempts SET state = 'published', ended_at = ? "
        "WHERE attempt_id = ? AND state = 'audited'",
        (at, attempt_id),
    )
    if moved.rowcount != 1:
        raise IllegalTransition(f"attempt {attempt_id} is not audited; it cannot publish")
    con.execute(
        # a cursor partition's end is the interval its attempt processed: an attempt that
        # failed before it may have planned another end from the same start
        "UPDATE partitions SET version_id = a.version_id, run_id = a.run_id, "
        "partition_end = a.partition_end, "
        "attempt_id = a.attempt_id, row_count = a.row_count, checksum = a.checksum, "
        "published_at = ?, last_state = CASE WHEN partitions.last_attempt_id = a.attempt_id "
        "THEN 'published' ELSE partitions.last_state END "
        "FROM attempts AS a WHERE a.attempt_id = ? AND partitions.model = a.model "
        "AND partitions.partition_start = a.partition_start",
        (at, attempt_id),
    )
