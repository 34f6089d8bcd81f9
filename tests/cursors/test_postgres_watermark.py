"""On PostgreSQL ids commit out of order: a transaction that took id 11 may commit after others
committed 12..16. A run must not move the cursor past 11 while that transaction is open, or the
row would be skipped for ever; once it has committed, the next run picks it up. And a run that
meets a new open transaction still advances to an earlier run's candidate once that one's
read has settled (every transaction open then has ended). What a transaction that had not
written yet, or wrote another table first, does: test_postgres_open_transactions.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.cursors.cursor_kit import MODEL, CursorProject, cursor_project

pytestmark = pytest.mark.postgres


@contextmanager
def slow_transaction(dsn: str) -> Iterator[tuple[psycopg.Connection[Any], int, int, str]]:
    """A transaction that took the next id and stays open until the caller commits it:
    (its connection, the id, its transaction id, its virtual transaction id)."""
    con = psycopg.connect(dsn)
    try:
        row = con.execute(
            "INSERT INTO events (kind, amount) VALUES ('slow', 1) RETURNING id"
        ).fetchone()
        xid = con.execute("SELECT CAST(pg_current_xact_id() AS TEXT)").fetchone()
        vxid = con.execute(
            "SELECT virtualxid FROM pg_locks WHERE pid = pg_backend_pid() "
            "AND locktype = 'virtualxid'"
        ).fetchone()
        assert row is not None and xid is not None and vxid is not None
        yield con, int(row[0]), int(xid[0]), str(vxid[0])
    finally:
        con.close()


def xact_status(events: CursorProject, xid: int) -> str:
    return str(events.execute("SELECT pg_xact_status(CAST(%s AS xid8))", [str(xid)])[0][0])


def mark_of(events: CursorProject, run: dict[str, Any]) -> dict[str, Any]:
    shown = events.tidegate("show", "run", run["run_id"], "--json").json()
    [mark] = shown["cursor"]
    return dict(mark)


def test_an_open_transaction_holding_a_lower_id_is_never_skipped(tmp_path: Path, dsn: str) -> None:
    events = cursor_project(tmp_path / "proj", dsn)
    events.insert(10)
    events.run()
    with slow_transaction(dsn) as (slow, slow_id, xid, vxid):
        assert slow_id == 11
        events.insert(5)  # 12..16 commit while 11 is still open
        assert xact_status(events, xid) == "in progress"
        held = events.run()
        assert held["partitions"] == []
        mark = mark_of(events, held)
        assert (mark["candidate"], mark["watermark"]) == ("16", None)
        assert mark["reason"].startswith(f"waiting for transaction(s) {vxid} still open")
        # show run says what the run waited for, and how long (at most SETTLE_SECONDS)
        assert re.search(rf"\(waited for transaction\(s\) {vxid}, [01]\.\d\ds\)$", mark["reason"])
        assert mark["open_transactions"] == vxid  # the transactions open at the read
        assert events.target_ids() == list(range(1, 11))
        slow.commit()
    assert xact_status(events, xid) == "committed"
    picked = events.run()
    assert [p["partition"] for p in picked["partitions"]] == ["(10,16]"]
    assert events.target_ids() == events.source_ids() == list(range(1, 17))


def test_a_run_advances_to_an_earlier_candidate_once_its_snapshot_settled(
    tmp_path: Path, dsn: str
) -> None:
    events = cursor_project(tmp_path / "proj", dsn)
    events.insert(10)
    events.run()
    with slow_transaction(dsn) as (first, _, _, _):
        events.insert(5)  # 12..16
        seen = events.run()  # sees max 16 with the first transaction open: moves nothing
        assert mark_of(events, seen)["watermark"] is None
        first.commit()
    with slow_transaction(dsn) as (second, second_id, _, vxid):
        assert second_id == 17
        events.insert(3)  # 18..20
        run = events.run()
        mark = mark_of(events, run)
        # this run's max (20) waits for the second transaction; the earlier run's max (16)
        # has settled: every transaction open at its snapshot has ended
        assert (mark["candidate"], mark["watermark"]) == ("20", "16")
        assert mark["reason"].startswith(
            f"max 16 (an earlier run's read); newer rows wait for transaction(s) {vxid} still open"
        )
        assert events.target_ids() == list(range(1, 17))
        second.commit()
    events.run()
    assert events.target_ids() == events.source_ids() == list(range(1, 21))
    assert MODEL in events.tidegate("status").stdout
