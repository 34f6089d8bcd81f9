-- What a mark says of the partitions it reached: `taint` (a user declared their data bad),
-- `stale` (an upstream partition they read was replaced by different content), `diverged` (the
-- warehouse holds another commit marker or other rows than the ledger records) or `missing`
-- (the warehouse holds no marker or no table for them).
ALTER TABLE taints ADD COLUMN kind TEXT COLLATE "C" NOT NULL DEFAULT 'taint';
-- the run whose publish made a `stale` mark, or whose check found a `diverged` one
ALTER TABLE taints ADD COLUMN run_id TEXT COLLATE "C";
CREATE INDEX taints_by_run ON taints (run_id) WHERE run_id IS NOT NULL;
-- A writer checks, when it starts, that the warehouse still holds the commit marker of each
-- model's newest published attempt (a warehouse restored from an older copy does not): found
-- by this index, not by reading the history.
CREATE INDEX attempts_published ON attempts (model, attempt_id) WHERE state = 'published';
