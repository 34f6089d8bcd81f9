-- Distributed backfills (docs/design.md §7): a run's batches queued in the ledger, claimed by workers
-- through leases. Lease times are the ledger database's own clock in epoch milliseconds, never a
-- worker's (`ledger_now_ms()`, a function the store registers on its connection); `token` is the
-- fencing token, raised by every claim.
ALTER TABLE runs ADD COLUMN distributed INTEGER NOT NULL DEFAULT 0;
-- a stop-loss that fired on a worker (JSON: name, partition, detail): no batch starts after it
ALTER TABLE runs ADD COLUMN halt TEXT;
-- the run's throttle, enforced across all workers when they claim
ALTER TABLE runs ADD COLUMN max_concurrency INTEGER;
ALTER TABLE runs ADD COLUMN rate_per_minute INTEGER;
-- when the run was last resumed, and its batches' tally then (JSON): a resumed run's stop-loss
-- judges what it does from there, as a resumed backfill on one machine does
ALTER TABLE runs ADD COLUMN resumed_at TEXT;
ALTER TABLE runs ADD COLUMN baseline TEXT;

-- fencing tokens: one sequence for every claim of every run, so that a later claim of the same
-- partitions, in any run, fences an earlier holder
CREATE TABLE ledger_tokens (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    token INTEGER NOT NULL
);
INSERT INTO ledger_tokens (id, token) VALUES (1, 0);

CREATE TABLE batches (
    run_id          TEXT NOT NULL REFERENCES runs (run_id),
    batch           INTEGER NOT NULL,
    model           TEXT NOT NULL,
    partition_start INTEGER NOT NULL,
    partition_end   INTEGER NOT NULL,
    state           TEXT NOT NULL,
    token           INTEGER NOT NULL,
    worker          TEXT,
    lease_expires   INTEGER,
    published       INTEGER NOT NULL,
    failed          INTEGER NOT NULL,
    skipped         INTEGER NOT NULL,
    row_count       INTEGER NOT NULL,
    source_rows     INTEGER NOT NULL,
    check_failures  INTEGER NOT NULL,
    mismatches      INTEGER NOT NULL,
    PRIMARY KEY (run_id, batch)
);
CREATE INDEX batches_by_state ON batches (state, run_id, batch);
CREATE INDEX batches_by_model ON batches (model, partition_start);

-- every claim of a batch: who held which token since when (the sliding-minute rate counts them)
CREATE TABLE batch_claims (
    run_id     TEXT NOT NULL,
    batch      INTEGER NOT NULL,
    token      INTEGER NOT NULL,
    worker     TEXT NOT NULL,
    claimed_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, batch, token)
);
CREATE INDEX batch_claims_by_time ON batch_claims (run_id, claimed_at);
