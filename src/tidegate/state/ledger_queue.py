"""Ledger tables of distributed backfills, shared by both stores: a run's batches queued for
workers, their leases and fencing tokens, and what each batch did (domain/queue.py).

Lease times come from the ledger database's clock, `ledger_now_ms()` (epoch milliseconds), never
a worker's. Each store gives that function, the claim's two locking reads (PostgreSQL skips the
rows another claim holds) and the lock that makes queueing a run and its overlap check one step
(sqlite_queue, postgres_queue)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from itertools import islice
from typing import TYPE_CHECKING, Any, ClassVar

from tidegate.domain.queue import BatchTally, HeldError, Lease, RunTally
from tidegate.domain.run import Attempt, Run
from tidegate.state.codec import attempt_from_row, run_params
from tidegate.state.ledger_tables import LedgerTables

INSERT_CHUNK = 10_000


class QueueTables(LedgerTables):
    # A claim's reads, each locking what it returns where the store locks rows: the run's
    # throttle (:run), and its next batch to start (:run, :now).
    LOCK_RUN: ClassVar[str]
    PICK_BATCH: ClassVar[str]

    if TYPE_CHECKING:  # each store's own (sqlite_queue, postgres_queue)

        def _hold_queue(self, con: Any) -> None:
            """Serialize the transactions that queue runs, for the rest of this one."""

    def create_distributed_run(
        self,
        run: Run,
        max_concurrency: int,
        rate_per_minute: int | None,
        selection: Sequence[tuple[int, int]],
        batches: Iterable[tuple[int, int, int]],
    ) -> None:
        """Record a distributed run and queue its batches (index, start, end), in one
        transaction; raises HeldError when a live distributed run of the model holds a
        partition of `selection` in a batch not yet done."""
        model = run.models[0]
        with self._tx() as con:
            self._hold_queue(con)
            _refuse_held(con, model, selection)
            con.execute(
                "INSERT INTO runs (run_id, kind, models, partitions, params, requester, status, "
                "reason, pid, started_at, ended_at, plan, plan_hash, distributed, "
                "max_concurrency, rate_per_minute) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*run_params(run), max_concurrency, rate_per_minute),
            )
            queued = iter(batches)
            while chunk := list(islice(queued, INSERT_CHUNK)):
                con.executemany(
                    "INSERT INTO batches (run_id, batch, model, partition_start, partition_end, "
                    "state, token, published, failed, skipped, row_count, source_rows, "
                    "check_failures, mismatches) "
                    "VALUES (?, ?, ?, ?, ?, 'queued', 0, 0, 0, 0, 0, 0, 0, 0)",
                    [(run.run_id, index, model, start, end) for index, start, end in chunk],
                )

    def reopen_distributed_run(
        self, run_id: str, pid: int, selection: Sequence[tuple[int, int]], at: str
    ) -> None:
        """Queue again the batches of a distributed run that are not done or left partitions
        failed or skipped (their tallies start over), and run it again from `at` (its tokens
        only grow); raises HeldError like create_distributed_run."""
        with self._tx() as con:
            self._hold_queue(con)
            row = con.execute("SELECT models FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            _refuse_held(con, str(json.loads(row["models"])[0]), selection, run_id)
            con.execute(
                "UPDATE batches SET state = 'queued', worker = NULL, lease_expires = NULL, "
                "published = 0, failed = 0, skipped = 0, row_count = 0, source_rows = 0, "
                "check_failures = 0, mismatches = 0 "
                "WHERE run_id = ? AND (state <> 'done' OR failed > 0 OR skipped > 0)",
                (run_id,),
            )
            baseline = _tally(con, run_id).done
            con.execute(
                "UPDATE runs SET status = 'running', reason = NULL, ended_at = NULL, "
                "trigger = NULL, stop_requested_at = NULL, halt = NULL, pid = ?, "
                "resumed_at = ?, baseline = ? WHERE run_id = ?",
                (pid, at, json.dumps(asdict(baseline)), run_id),
            )

    def run_resumed(self, run_id: str) -> tuple[str, BatchTally] | None:
        """When a distributed run was last resumed, and what its batches had done then."""
        row = self._one("SELECT resumed_at, baseline FROM runs WHERE run_id = ?", (run_id,))
        if row is None or row[0] is None:
            return None
        return str(row[0]), BatchTally(**json.loads(row[1]))

    def claim_batch(self, worker: str, lease_ms: int) -> Lease | None:
        """Lease the next batch a worker may start: of the oldest live distributed run that is
        neither stopped nor halted, whose batches in flight stay under its concurrency and
        whose claims in the last minute under its rate; a batch queued, or one whose lease
        expired. Raises the batch's fencing token. None when nothing may start now."""
        with self._tx() as con:
            now = int(con.execute("SELECT ledger_now_ms()").fetchone()[0])
            candidates = con.execute(
                "SELECT run_id FROM runs WHERE status = 'running' AND distributed = 1 "
                "AND stop_requested_at IS NULL AND halt IS NULL ORDER BY run_id"
            ).fetchall()
            for (run_id,) in candidates:
                lease = self._claim_in(con, run_id, worker, now, lease_ms)
                if lease is not None:
                    return lease
        return None

    def _claim_in(
        self, con: Any, run_id: str, worker: str, now: int, lease_ms: int
    ) -> Lease | None:
        # the run's row, locked: claims of one run are judged against its throttle one at a time
        run = con.execute(self.LOCK_RUN, {"run": run_id}).fetchone()
        if run is None:
            return None
        limit, rate = run["max_concurrency"], run["rate_per_minute"]
        in_flight = con.execute(
            "SELECT count(*) FROM batches WHERE run_id = ? AND state = 'leased' "
            "AND lease_expires > ?",
            (run_id, now),
        ).fetchone()[0]
        if limit is not None and in_flight >= limit:
            return None
        if rate is not None:
            started = con.execute(
                "SELECT count(*) FROM batch_claims WHERE run_id = ? AND claimed_at > ?",
                (run_id, now - 60_000),
            ).fetchone()[0]
            if started >= rate:
                return None
        pick = con.execute(self.PICK_BATCH, {"run": run_id, "now": now}).fetchone()
        if pick is None:
            return None
        token = int(
            con.execute(
                "UPDATE ledger_tokens SET token = token + 1 WHERE id = 1 RETURNING token"
            ).fetchone()[0]
        )
        con.execute(
            "UPDATE batches SET state = 'leased', token = ?, worker = ?, lease_expires = ? "
            "WHERE run_id = ? AND batch = ?",
            (token, worker, now + lease_ms, run_id, pick["batch"]),
        )
        con.execute(
            "INSERT INTO batch_claims (run_id, batch, token, worker, claimed_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (run_id, pick["batch"], token, worker, now),
        )
        return Lease(
            run_id,
            int(pick["batch"]),
            pick["model"],
            int(pick["partition_start"]),
            int(pick["partition_end"]),
            token,
            worker,
            now + lease_ms,
        )

    def renew_lease(self, lease: Lease, lease_ms: int) -> bool:
        """Extend a live lease by `lease_ms` from now; False when it expired (even if no one
        took the batch yet: its run may be over), or its token is no longer the batch's."""
        with self._tx() as con:
            moved = con.execute(
                "UPDATE batches SET lease_expires = ledger_now_ms() + ? "
                "WHERE run_id = ? AND batch = ? AND token = ? AND state = 'leased' "
                "AND lease_expires > ledger_now_ms()",
                (lease_ms, lease.run_id, lease.batch, lease.token),
            )
            return bool(moved.rowcount == 1)

    def settle_batch(self, lease: Lease, tally: BatchTally, halt: str | None = None) -> bool:
        """Mark a batch done with what it did while its lease lives, and record the stop-loss
        it fired (`halt`) in the same transaction; False (nothing written) when the lease
        expired or its token is stale: a worker that lost its lease cannot checkpoint."""
        with self._tx() as con:
            moved = con.execute(
                "UPDATE batches SET state = 'done', lease_expires = NULL, published = ?, "
                "failed = ?, skipped = ?, row_count = ?, source_rows = ?, check_failures = ?, "
                "mismatches = ? WHERE run_id = ? AND batch = ? AND token = ? AND state = 'leased' "
                "AND lease_expires > ledger_now_ms()",
                (
                    tally.published,
                    tally.failed,
                    tally.skipped,
                    tally.rows,
                    tally.source_rows,
                    tally.check_failures,
                    tally.mismatches,
                    lease.run_id,
                    lease.batch,
                    lease.token,
                ),
            )
            if moved.rowcount != 1:
                return False
            if halt is not None:
                con.execute(
                    "UPDATE runs SET halt = coalesce(halt, ?) WHERE run_id = ?",
                    (halt, lease.run_id),
                )
            return True

    def batch_outcome(self, run_id: str, batch: int) -> dict[str, tuple[int, int]]:
        """Per state, the partitions of a batch whose newest attempt in the run is in it, and
        their rows: what the batch did, whichever workers did it."""
        rows = self._all(
            "SELECT state, count(*), coalesce(sum(row_count), 0) FROM attempts AS a "
            "WHERE run_id = ? AND batch = ? AND NOT EXISTS (SELECT 1 FROM attempts AS b "
            "WHERE b.run_id = a.run_id AND b.batch = a.batch "
            "AND b.partition_start = a.partition_start AND b.attempt_id > a.attempt_id) "
            "GROUP BY state",
            (run_id, batch),
        )
        return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}

    def release_batch(self, lease: Lease) -> bool:
        """Give a leased batch back to the queue untouched (its token stays: the next claim
        raises it)."""
        with self._tx() as con:
            moved = con.execute(
                "UPDATE batches SET state = 'queued', worker = NULL, lease_expires = NULL "
                "WHERE run_id = ? AND batch = ? AND token = ? AND state = 'leased'",
                (lease.run_id, lease.batch, lease.token),
            )
            return bool(moved.rowcount == 1)

    def run_halt(self, run_id: str) -> str | None:
        row = self._one("SELECT halt FROM runs WHERE run_id = ?", (run_id,))
        return None if row is None else row[0]

    def run_tally(self, run_id: str) -> RunTally:
        with self._read_tx() as con:
            return _tally(con, run_id)

    def close_distributed_run(
        self, run_id: str, status: str, reason: str | None, at: str, trigger: str | None
    ) -> bool:
        """End a live distributed run when no batch of it is in flight (compare-and-set: of
        the workers that see it over, exactly one closes it)."""
        with self._tx() as con:
            moved = con.execute(
                "UPDATE runs SET status = ?, reason = ?, ended_at = ?, trigger = ? "
                "WHERE run_id = ? AND status = 'running' AND NOT EXISTS (SELECT 1 FROM batches "
                "WHERE run_id = ? AND state = 'leased' AND lease_expires > ledger_now_ms())",
                (status, reason, at, trigger, run_id, run_id),
            )
            return bool(moved.rowcount == 1)

    def live_attempts_of_batch(self, run_id: str, batch: int) -> list[Attempt]:
        """The attempts of a batch a previous lease holder left unfinished."""
        rows = self._all(
            "SELECT * FROM attempts WHERE run_id = ? AND batch = ? "
            "AND state IN ('pending', 'running', 'staged', 'audited') ORDER BY attempt_id",
            (run_id, batch),
        )
        return [attempt_from_row(r) for r in rows]

    def batch_claims(self, run_id: str) -> list[tuple[int, int, str, int]]:
        """Every claim of the run's batches: (batch, token, worker, claimed at in epoch ms of
        the ledger's clock), in claim order."""
        rows = self._all(
            "SELECT batch, token, worker, claimed_at FROM batch_claims WHERE run_id = ? "
            "ORDER BY claimed_at, batch, token",
            (run_id,),
        )
        return [(int(r[0]), int(r[1]), str(r[2]), int(r[3])) for r in rows]


def _tally(con: Any, run_id: str) -> RunTally:
    row = con.execute(
        "SELECT coalesce(sum(published), 0), coalesce(sum(failed), 0), "
        "coalesce(sum(skipped), 0), coalesce(sum(row_count), 0), "
        "coalesce(sum(source_rows), 0), coalesce(sum(check_failures), 0), "
        "coalesce(sum(mismatches), 0), "
        "coalesce(sum(CASE WHEN state = 'queued' OR (state = 'leased' AND lease_expires "
        "<= ledger_now_ms()) THEN 1 ELSE 0 END), 0), "
        "coalesce(sum(CASE WHEN state = 'leased' AND lease_expires "
        "> ledger_now_ms() THEN 1 ELSE 0 END), 0) FROM batches WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    values = [int(v) for v in (row or [0] * 9)]
    return RunTally(BatchTally(*values[:7]), queued=values[7], in_flight=values[8])


def _refuse_held(
    con: Any, model: str, selection: Sequence[tuple[int, int]], run_id: str | None = None
) -> None:
    for start, end in selection:
        held = con.execute(
            "SELECT b.run_id, b.partition_start, b.partition_end FROM batches AS b "
            "JOIN runs AS r ON r.run_id = b.run_id WHERE r.status = 'running' "
            "AND b.model = ? AND b.state <> 'done' AND b.partition_start < ? "
            "AND b.partition_end > ? AND b.run_id <> ? ORDER BY b.partition_start LIMIT 1",
            (model, end, start, run_id or ""),
        ).fetchone()
        if held is not None:
            raise HeldError(held[0], int(held[1]), int(held[2]))
