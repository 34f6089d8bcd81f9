"""On PostgreSQL a row's cursor value is taken inside its transaction, which may commit long
after: a timestamp defaulting to now() is the transaction's start, an application may take the
next id (`nextval`) before its INSERT, or write another table first. A run must hold the cursor
back for every transaction open when it read max(cursor), whether or not it had written
anything yet, and the first run must not start above a row still in flight."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.cursors.cursor_kit import MODEL, CursorProject, cursor_project
from tests.faults.ledger import wait_until

pytestmark = pytest.mark.postgres

NOW_MODEL = """/* tidegate
grain = "cursor"
cursor_column = "created_at"
write_mode = "append"

[columns]
id = "BIGINT NOT NULL"
created_at = "TIMESTAMP NOT NULL"
kind = "VARCHAR NOT NULL"
*/
SELECT id, created_at, kind FROM events WHERE created_at > $start AND created_at <= $end
"""


def now_project(root: Path, dsn: str) -> CursorProject:
    """The events source with a cursor on created_at (DEFAULT now(): the transaction's start)."""
    events = cursor_project(root, dsn)
    events.write_model(sql=NOW_MODEL)
    assert events.tidegate("build").exit_code == 0
    deployed = events.tidegate("deploy", MODEL, "--force", "--reason", "created_at cursor")
    assert deployed.exit_code == 0, deployed.stderr
    return events


def insert_each(events: CursorProject, count: int) -> None:
    """`count` events, one transaction each: each its own now()."""
    for _ in range(count):
        events.execute("INSERT INTO events (kind, amount) VALUES ('k', 1)")


def caught_up(events: CursorProject) -> None:
    """One more event and a run: everything below it is in the target, once."""
    insert_each(events, 1)
    events.run()
    assert sorted(events.target_ids()) == events.source_ids()[:-1]


def mark_of(events: CursorProject, run: dict[str, Any]) -> dict[str, Any]:
    shown = events.tidegate("show", "run", run["run_id"], "--json").json()
    [mark] = shown["cursor"]
    return dict(mark)


def test_a_transaction_that_read_first_holds_its_now_timestamp_back(
    tmp_path: Path, dsn: str
) -> None:
    events = now_project(tmp_path / "proj", dsn)
    insert_each(events, 3)
    events.run()
    with psycopg.connect(dsn) as slow:
        slow.execute("SELECT count(*) FROM events")  # in a transaction, no xid yet: now() fixed
        time.sleep(0.05)
        insert_each(events, 2)  # later timestamps, committed
        held = events.run()
        mark = mark_of(events, held)
        assert mark["watermark"] is None and "for transaction(s)" in mark["reason"]
        slow.execute("INSERT INTO events (kind, amount) VALUES ('slow', 1)")
        slow.commit()
    caught_up(events)


def test_an_id_taken_before_the_insert_is_never_skipped(tmp_path: Path, dsn: str) -> None:
    events = cursor_project(tmp_path / "proj", dsn)
    events.insert(3)
    events.run()
    with psycopg.connect(dsn) as slow:
        row = slow.execute("SELECT nextval(pg_get_serial_sequence('events', 'id'))").fetchone()
        assert row is not None and row[0] == 4
        events.insert(2)  # 5, 6
        assert events.run()["partitions"] == []
        slow.execute(
            "INSERT INTO events (id, kind, amount) OVERRIDING SYSTEM VALUE VALUES (%s, 'slow', 1)",
            [row[0]],
        )
        slow.commit()
    events.run()
    assert events.target_ids() == events.source_ids() == [1, 2, 3, 4, 5, 6]


def test_a_transaction_that_wrote_another_table_first_holds_the_cursor_back(
    tmp_path: Path, dsn: str
) -> None:
    events = now_project(tmp_path / "proj", dsn)
    events.execute("CREATE TABLE audit_log (note TEXT)")
    insert_each(events, 3)
    events.run()
    with psycopg.connect(dsn) as slow:
        slow.execute("INSERT INTO audit_log VALUES ('x')")
        time.sleep(0.05)
        insert_each(events, 2)
        assert events.run()["partitions"] == []
        slow.execute("INSERT INTO events (kind, amount) VALUES ('slow', 1)")
        slow.commit()
    caught_up(events)


def test_an_open_transaction_that_has_written_nothing_holds_the_cursor_until_it_ends(
    tmp_path: Path, dsn: str
) -> None:
    events = cursor_project(tmp_path / "proj", dsn)
    events.insert(4)
    with psycopg.connect(dsn) as other:
        other.execute("SELECT 1")  # open …
        held = events.run()
        assert held["partitions"] == []
        other.rollback()  # … and ended: the next run goes up to the earlier candidate
    assert events.run()["partitions"] != []
    assert events.target_ids() == [1, 2, 3, 4]


def test_the_first_run_keeps_a_lower_row_committed_while_it_settles(
    tmp_path: Path, dsn: str
) -> None:
    events = cursor_project(tmp_path / "proj", dsn)
    slow = psycopg.connect(dsn)
    watcher = psycopg.connect(dsn, autocommit=True)
    try:
        slow.execute("INSERT INTO events (kind, amount) VALUES ('slow', 1)")  # id 1, open
        events.insert(5)  # 2..6 committed
        command = [sys.executable, "-m", "tidegate", "run", MODEL, "--project", str(events.root)]
        run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(  # the run reading which transactions are open
            "the run to look for open transactions",
            lambda: (
                watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%%pg_locks%%' "
                    "AND pid <> pg_backend_pid() AND datname = current_database()"
                ).fetchone()[0]
                or None
            ),
            60,
        )
        slow.commit()
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, out + err
    finally:
        slow.close()
        watcher.close()
    events.run()
    assert events.target_ids() == events.source_ids() == [1, 2, 3, 4, 5, 6]
