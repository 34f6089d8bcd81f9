-- What each run of a cursor model saw and how far it went: the newest cursor value in its
-- source (`candidate`, NULL when the source had no rows) and, where transactions commit out of
-- order (PostgreSQL), the transactions open when that value was read (`snapshot`: their
-- virtual transaction ids, `backend/local,...`); the committed cursor the run started
-- from, the watermark it processed up to (NULL: nowhere past the committed cursor), the rule
-- that set it and why. A later run may process up to an earlier run's candidate once every
-- transaction open at its read has ended. Values are in the cursor's units (ids, or epoch
-- microseconds) of the source table and column the row names.
CREATE TABLE cursor_marks (
    run_id        TEXT NOT NULL REFERENCES runs (run_id),
    model         TEXT NOT NULL,
    source_table  TEXT NOT NULL,
    cursor_column TEXT NOT NULL,
    observed_at   TEXT NOT NULL,
    candidate     INTEGER,
    snapshot      TEXT,
    committed     INTEGER,
    watermark     INTEGER,
    rule          TEXT NOT NULL,
    reason        TEXT NOT NULL,
    PRIMARY KEY (run_id, model)
);
CREATE INDEX cursor_marks_by_model ON cursor_marks (model, run_id)
