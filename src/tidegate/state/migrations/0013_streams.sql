-- The job of each stream model (kind = "flink"): which version runs or ran, in which state
-- (starting, running, handover, stopped, failed), as which Flink job, restored from which
-- savepoint or checkpoint, at which address its REST API and web UI answer; the newest
-- savepoint tidegate took and the newest checkpoint the job completed (with the count since it
-- started); the supervisor process that runs it and when it last reported. One row per model,
-- rewritten as the stream changes; its history is in `events` (stream_start, savepoint,
-- takeover, takeover_failed, stream_failed).
CREATE TABLE streams (
    model               TEXT PRIMARY KEY,
    version_id          TEXT NOT NULL REFERENCES versions (version_id),
    state               TEXT NOT NULL,
    job_id              TEXT,
    restored_from       TEXT,
    savepoint           TEXT,
    checkpoint          TEXT,
    checkpoints         INTEGER NOT NULL,
    supervisor_pid      INTEGER,
    supervisor_host     TEXT,
    heartbeat_at        TEXT,
    updated_at          TEXT NOT NULL,
    previous_version_id TEXT REFERENCES versions (version_id),
    address             TEXT
);
