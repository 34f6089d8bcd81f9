-- A contamination mark a user declared on a range of a model's partitions.
CREATE TABLE taints (
    taint_id    TEXT PRIMARY KEY,
    model       TEXT NOT NULL,
    grain       TEXT NOT NULL,
    range_start INTEGER NOT NULL,
    range_end   INTEGER NOT NULL,
    reason      TEXT NOT NULL,
    actor       TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

-- Each published partition a taint reached: in its range (depth 0), or downstream through the
-- partitions that read it (depth 1, 2 …, reached via one upstream partition). A mark names the
-- attempt it contaminated; publishing another attempt of the partition clears it.
CREATE TABLE tainted_partitions (
    mark_id         INTEGER PRIMARY KEY AUTOINCREMENT,
    taint_id        TEXT NOT NULL REFERENCES taints (taint_id),
    model           TEXT NOT NULL,
    partition_start INTEGER NOT NULL,
    partition_end   INTEGER NOT NULL,
    attempt_id      TEXT NOT NULL REFERENCES attempts (attempt_id),
    depth           INTEGER NOT NULL,
    via_model       TEXT,
    via_start       INTEGER,
    marked_at       TEXT NOT NULL,
    cleared_at      TEXT,
    cleared_by      TEXT,
    UNIQUE (taint_id, model, partition_start, attempt_id)
);
CREATE INDEX taints_open ON tainted_partitions (model, partition_start) WHERE cleared_at IS NULL;
CREATE INDEX taints_cleared_by ON tainted_partitions (cleared_by) WHERE cleared_by IS NOT NULL;

-- What registered consumers have read of a model: acknowledged with `tidegate ack` (no outbox
-- row), or told by a `published` notice (consumed once that outbox row is delivered).
CREATE TABLE consumer_reads (
    consumer    TEXT NOT NULL,
    model       TEXT NOT NULL,
    range_start INTEGER NOT NULL,
    range_end   INTEGER NOT NULL,
    outbox_id   INTEGER REFERENCES outbox (id),
    at          TEXT NOT NULL
);
CREATE INDEX consumer_reads_by_model ON consumer_reads (model, range_start);

-- Lineage read backwards: the attempts that read a window of an upstream model.
CREATE INDEX attempt_inputs_by_upstream ON attempt_inputs (upstream, range_start)
    WHERE kind = 'model';
