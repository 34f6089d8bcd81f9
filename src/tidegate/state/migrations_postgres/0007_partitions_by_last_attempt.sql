-- Every attempt state change finds its partition row by the attempt: without this index each
-- change scans the whole read model, and a long backfill slows down with the history.
CREATE INDEX partitions_by_last_attempt ON partitions (last_attempt_id);
