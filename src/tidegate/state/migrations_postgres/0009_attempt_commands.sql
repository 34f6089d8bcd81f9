-- The external job a command model's attempt ran: its arguments, the environment tidegate set
-- for it (secret values masked), its process id, exit code, duration and the tail of its
-- stderr. The attempts of one unit share one run of the job: each has the same row. Written
-- when the job starts (no exit code yet: it was running when tidegate stopped) and when it ends.
CREATE TABLE attempt_commands (
    attempt_id  TEXT COLLATE "C" PRIMARY KEY REFERENCES attempts (attempt_id),
    command     TEXT NOT NULL,
    environment TEXT NOT NULL,
    pid         BIGINT,
    exit_code   BIGINT,
    duration_ms BIGINT,
    stderr_tail TEXT,
    started_at  TEXT COLLATE "C" NOT NULL,
    ended_at    TEXT COLLATE "C"
);
