"""The partition protocol: intent → stage → audit → publish with marker → ledger."""
