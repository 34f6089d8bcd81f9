CREATE TABLE versions (
    version_id    TEXT PRIMARY KEY,
    model         TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    fingerprint   TEXT NOT NULL,
    sql_text      TEXT NOT NULL,
    spec          TEXT NOT NULL,
    upstream      TEXT NOT NULL,
    git_commit    TEXT,
    git_dirty     INTEGER NOT NULL,
    tool_versions TEXT NOT NULL,
    change        TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    UNIQUE (model, seq),
    UNIQUE (model, fingerprint)
);

CREATE TABLE model_state (
    model            TEXT PRIMARY KEY,
    active_version   TEXT REFERENCES versions (version_id),
    previous_version TEXT REFERENCES versions (version_id),
    paused           INTEGER NOT NULL DEFAULT 0,
    deployed_at      TEXT
);

CREATE TABLE events (
    event_id   INTEGER PRIMARY KEY AUTOINCREMENT,
    model      TEXT,
    kind       TEXT NOT NULL,
    version_id TEXT,
    run_id     TEXT,
    actor      TEXT NOT NULL,
    reason     TEXT,
    at         TEXT NOT NULL,
    detail     TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_by_model ON events (model, event_id);

CREATE TABLE runs (
    run_id     TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    models     TEXT NOT NULL,
    partitions TEXT NOT NULL,
    params     TEXT NOT NULL,
    requester  TEXT NOT NULL,
    status     TEXT NOT NULL,
    reason     TEXT,
    pid        INTEGER,
    started_at TEXT NOT NULL,
    ended_at   TEXT
);
CREATE INDEX runs_by_status ON runs (status);

CREATE TABLE attempts (
    attempt_id      TEXT PRIMARY KEY,
    run_id          TEXT NOT NULL REFERENCES runs (run_id),
    model           TEXT NOT NULL,
    grain           TEXT NOT NULL,
    partition_start INTEGER NOT NULL,
    partition_end   INTEGER NOT NULL,
    version_id      TEXT NOT NULL REFERENCES versions (version_id),
    state           TEXT NOT NULL,
    started_at      TEXT NOT NULL,
    ended_at        TEXT,
    row_count       INTEGER,
    checksum        TEXT,
    error           TEXT
);
CREATE INDEX attempts_by_run ON attempts (run_id);
CREATE INDEX attempts_live ON attempts (state)
    WHERE state IN ('pending', 'running', 'staged', 'audited');

CREATE TABLE check_results (
    attempt_id TEXT NOT NULL REFERENCES attempts (attempt_id),
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    severity   TEXT NOT NULL,
    passed     INTEGER NOT NULL,
    measured   TEXT NOT NULL,
    message    TEXT NOT NULL,
    PRIMARY KEY (attempt_id, name)
);

CREATE TABLE attempt_inputs (
    attempt_id        TEXT NOT NULL REFERENCES attempts (attempt_id),
    upstream          TEXT NOT NULL,
    kind              TEXT NOT NULL,
    range_start       INTEGER NOT NULL,
    range_end         INTEGER NOT NULL,
    fingerprint       TEXT,
    upstream_attempts TEXT NOT NULL,
    PRIMARY KEY (attempt_id, upstream)
);

CREATE TABLE partitions (
    model           TEXT NOT NULL,
    grain           TEXT NOT NULL,
    partition_start INTEGER NOT NULL,
    partition_end   INTEGER NOT NULL,
    version_id      TEXT,
    run_id          TEXT,
    attempt_id      TEXT,
    row_count       INTEGER,
    checksum        TEXT,
    published_at    TEXT,
    last_attempt_id TEXT NOT NULL,
    last_state      TEXT NOT NULL,
    last_error      TEXT,
    PRIMARY KEY (model, partition_start)
);
