"""The ledger: tidegate's state store behind one interface."""
