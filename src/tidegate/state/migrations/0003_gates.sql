CREATE TABLE gates (
    gate_id     TEXT PRIMARY KEY,
    model       TEXT NOT NULL,
    version_id  TEXT NOT NULL REFERENCES versions (version_id),
    passed      INTEGER NOT NULL,
    flaky       INTEGER NOT NULL,
    inputs      TEXT NOT NULL,
    partitions  TEXT NOT NULL,
    report      TEXT NOT NULL,
    actor       TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE INDEX gates_by_model ON gates (model, created_at);
