"""PostgreSQL's part of the taint tables (the rest is ledger_taints): the marks lock that
keeps a taint and the publishes apart."""

from __future__ import annotations

from typing import Any

from tidegate.state import ledger_taints
from tidegate.state.postgres_tables import PostgresTables, Session

# The lock that keeps marks and publishes apart: pg_advisory_xact_lock(MARKS_LOCK, hashtext of
# the ledger's schema). Publishes share it; a taint holds it alone.
#
# Why a lock and not SERIALIZABLE: a taint reads lineage (published partitions and what their
# attempts read) and writes marks; a publish writes lineage and reads marks (it inherits the
# open marks of what it read). Under READ COMMITTED, a publish committing while a taint runs
# would be missed by both: the taint read lineage before it, and it read marks before the taint
# committed. With the lock, a taint waits for the publishes in flight, then sees them all (each
# READ COMMITTED statement after the lock sees every commit before it), and publishes that come
# later wait for the taint and see its marks. SERIALIZABLE would detect the same conflict
# only by failing one of the transactions, which every caller would then have to retry.
MARKS_LOCK = 0x7464_0002


class TaintTables(ledger_taints.TaintTables, PostgresTables):
    def _hold_marks(self, con: Any, exclusive: bool) -> None:
        hold_marks(con, exclusive)


def hold_marks(con: Session, exclusive: bool) -> None:
    """Take the marks lock for the rest of the transaction (see MARKS_LOCK)."""
    if exclusive:
        con.execute("SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))", (MARKS_LOCK,))
    else:
        con.execute(
            "SELECT pg_advisory_xact_lock_shared(%s, hashtext(current_schema()))", (MARKS_LOCK,)
        )
