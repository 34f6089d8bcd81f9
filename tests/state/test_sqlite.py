"""The embedded ledger: SQLite in WAL mode with numbered migrations, and the StateStore
contract."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.state.contract import RUN_A, V1, StateStoreContract, run
from tests.state.cursor_contract import CursorStoreContract
from tests.state.queue_contract import QueueStoreContract
from tests.state.stream_contract import StreamStoreContract
from tests.state.taint_contract import TaintStoreContract
from tidegate.domain.errors import StateStoreError, UsageError
from tidegate.state.base import StateStore
from tidegate.state.sqlite import SCHEMA_VERSION, SQLiteStateStore, migrations


class TestSQLite(
    StateStoreContract,
    TaintStoreContract,
    QueueStoreContract,
    CursorStoreContract,
    StreamStoreContract,
):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[StateStore]:
        opened = SQLiteStateStore(tmp_path / ".tidegate" / "state.db")
        try:
            yield opened
        finally:
            opened.close()


def applied(path: Path) -> list[tuple[int, str]]:
    con = sqlite3.connect(path)
    try:
        return con.execute(
            "SELECT version, applied_at FROM schema_migrations ORDER BY 1"
        ).fetchall()
    finally:
        con.close()


def test_a_new_store_is_migrated_to_the_latest_schema(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "state.db"
    SQLiteStateStore(path).close()
    assert [number for number, _ in applied(path)] == [n for n, _ in migrations()]
    assert max(number for number, _ in applied(path)) == SCHEMA_VERSION


def test_reopening_does_not_run_migrations_again(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SQLiteStateStore(path)
    store.save_version(V1)
    store.create_run(run(RUN_A))
    store.close()
    before = applied(path)

    again = SQLiteStateStore(path)
    try:
        assert again.get_version(V1.version_id) == V1
        assert again.get_run(RUN_A) == run(RUN_A)
    finally:
        again.close()
    assert applied(path) == before


def test_the_ledger_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SQLiteStateStore(path)
    try:
        con = sqlite3.connect(path)
        try:
            assert con.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
        finally:
            con.close()
    finally:
        store.close()


def test_a_store_from_a_newer_tidegate_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SQLiteStateStore(path).close()
    con = sqlite3.connect(path)
    con.execute("INSERT INTO schema_migrations (version) VALUES (?)", (SCHEMA_VERSION + 1,))
    con.commit()
    con.close()
    before = path.read_bytes()

    with pytest.raises(StateStoreError) as raised:
        SQLiteStateStore(path)
    error = raised.value
    assert isinstance(error, UsageError)
    assert error.exit_code == 2
    assert str(path) in str(error)
    assert "upgrade" in str(error)
    assert f"v{SCHEMA_VERSION + 1}" in str(error)
    assert [n for n, _ in applied(path)][-1] == SCHEMA_VERSION + 1
    assert path.read_bytes() == before


def test_a_corrupted_store_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    garbage = random.Random(42).randbytes(8192)
    path.write_bytes(garbage)
    with pytest.raises(StateStoreError) as raised:
        SQLiteStateStore(path)
    assert raised.value.exit_code == 2
    assert str(path) in str(raised.value)
    assert len(str(raised.value).splitlines()) == 1
    assert path.read_bytes() == garbage  # nothing rebuilt silently


def test_a_store_is_readable_while_another_connection_writes(tmp_path: Path) -> None:
    """WAL: a reader (status, show) sees committed state while a writer holds a transaction."""
    path = tmp_path / "state.db"
    writer = SQLiteStateStore(path)
    reader = SQLiteStateStore(path)
    try:
        writer.save_version(V1)
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        blocker.execute("INSERT INTO events (kind, actor, at) VALUES ('x', 'y', 'z')")
        try:
            assert reader.get_version(V1.version_id) == V1
            assert reader.events("daily_revenue") == []
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
    finally:
        writer.close()
        reader.close()


def test_attempt_state_changes_find_their_partition_by_index(tmp_path: Path) -> None:
    """Each state change of an attempt updates its partition's row by the attempt id: a scan
    would make every change cost the whole history."""
    path = tmp_path / "state.db"
    SQLiteStateStore(path).close()
    con = sqlite3.connect(path)
    try:
        plan = con.execute(
            "EXPLAIN QUERY PLAN UPDATE partitions SET last_state = 'running' "
            "WHERE last_attempt_id = ?",
            ("att-1",),
        ).fetchall()
    finally:
        con.close()
    assert any("partitions_by_last_attempt" in str(row) for row in plan), plan
