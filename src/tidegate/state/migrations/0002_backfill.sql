ALTER TABLE runs ADD COLUMN stop_requested_at TEXT;
ALTER TABLE runs ADD COLUMN plan TEXT;
ALTER TABLE runs ADD COLUMN plan_hash TEXT;
ALTER TABLE runs ADD COLUMN trigger TEXT;

ALTER TABLE attempts ADD COLUMN batch INTEGER;

CREATE TABLE reconciliations (
    attempt_id   TEXT NOT NULL REFERENCES attempts (attempt_id),
    name         TEXT NOT NULL,
    source_value TEXT,
    target_value TEXT,
    tolerance    TEXT NOT NULL,
    passed       INTEGER NOT NULL,
    PRIMARY KEY (attempt_id, name)
);

CREATE INDEX attempts_by_model_partition ON attempts (model, partition_start);
