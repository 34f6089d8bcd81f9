-- Distributed backfills (docs/design.md §7): a run's batches queued in the ledger, claimed by workers
-- through leases. Lease times are the ledger database's own clock in epoch milliseconds, never a
-- worker's; `token` is the fencing token, raised by every claim.
ALTER TABLE runs ADD COLUMN distributed INTEGER NOT NULL DEFAULT 0;
-- a stop-loss that fired on a worker (JSON: name, partition, detail): no batch starts after it
ALTER TABLE runs ADD COLUMN halt TEXT;
-- the run's throttle, enforced across all workers when they claim
ALTER TABLE runs ADD COLUMN max_concurrency BIGINT;
ALTER TABLE runs ADD COLUMN rate_per_minute BIGINT;
-- when the run was last resumed, and its batches' tally then (JSON): a resumed run's stop-loss
-- judges what it does from there, as a resumed backfill on one machine does
ALTER TABLE runs ADD COLUMN resumed_at TEXT COLLATE "C";
ALTER TABLE runs ADD COLUMN baseline TEXT;

-- fencing tokens: one sequence for every claim of every run, so that a later claim of the same
-- partitions, in any run, fences an earlier holder
CREATE TABLE ledger_tokens (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    token BIGINT NOT NULL
);
INSERT INTO ledger_tokens (id, token) VALUES (1, 0);

CREATE TABLE batches (
    run_id          TEXT COLLATE "C" NOT NULL REFERENCES runs (run_id),
    batch           BIGINT NOT NULL,
    model           TEXT COLLATE "C" NOT NULL,
    partition_start BIGINT NOT NULL,
    partition_end   BIGINT NOT NULL,
    state           TEXT COLLATE "C" NOT NULL,
    token           BIGINT NOT NULL,
    worker          TEXT COLLATE "C",
    lease_expires   BIGINT,
    published       BIGINT NOT NULL,
    failed          BIGINT NOT NULL,
    skipped         BIGINT NOT NULL,
    row_count       BIGINT NOT NULL,
    source_rows     BIGINT NOT NULL,
    check_failures  BIGINT NOT NULL,
    mismatches      BIGINT NOT NULL,
    PRIMARY KEY (run_id, batch)
);
CREATE INDEX batches_by_state ON batches (state, run_id, batch);
CREATE INDEX batches_by_model ON batches (model, partition_start);

-- every claim of a batch: who held which token since when (the sliding-minute rate counts them)
CREATE TABLE batch_claims (
    run_id     TEXT COLLATE "C" NOT NULL,
    batch      BIGINT NOT NULL,
    token      BIGINT NOT NULL,
    worker     TEXT COLLATE "C" NOT NULL,
    claimed_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, batch, token)
);
CREATE INDEX batch_claims_by_time ON batch_claims (run_id, claimed_at);

-- the ledger's clock for leases, in epoch milliseconds: the server's time when a statement runs
-- (clock_timestamp(), not the start of its transaction). SQLite's store registers its own.
CREATE FUNCTION ledger_now_ms() RETURNS BIGINT LANGUAGE SQL VOLATILE AS
$$ SELECT CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT) $$;
