-- Events waiting for delivery to a notification target, and the record of those delivered.
-- Rows are never deleted on failure: a target that is down gets them once it is back.
CREATE TABLE outbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    target           TEXT NOT NULL,
    payload          TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TEXT NOT NULL,
    delivered_at     TEXT,
    last_error       TEXT
);

-- The head of each target's queue: its oldest undelivered row.
CREATE INDEX outbox_pending ON outbox (target, id) WHERE delivered_at IS NULL;
