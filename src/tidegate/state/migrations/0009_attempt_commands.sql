-- The external job a command model's attempt ran: its arguments, the environment tidegate set
-- for it (secret values masked), its process id, exit code, duration and the tail of its
-- stderr. The attempts of one unit share one run of the job: each has the same row. Written
-- when the job starts (no exit code yet: it was running when tidegate stopped) and when it ends.
CREATE TABLE attempt_commands (
    attempt_id  TEXT PRIMARY KEY REFERENCES attempts (attempt_id),
    command     TEXT NOT NULL,
    environment TEXT NOT NULL,
    pid         INTEGER,
    exit_code   INTEGER,
    duration_ms INTEGER,
    stderr_tail TEXT,
    started_at  TEXT NOT NULL,
    ended_at    TEXT
);
