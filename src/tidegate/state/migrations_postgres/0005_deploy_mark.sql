-- The newest attempt when the active version was deployed: attempts after it confirm the deploy.
-- An order of the ledger's own, not of clocks: runs may be backdated with --as-of.
ALTER TABLE model_state ADD COLUMN deploy_mark BIGINT;
