"""Delivery of lineage events and consumer notices: builders, an outbox in the ledger, targets."""
