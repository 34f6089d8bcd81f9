"""The SQLite ledger passes the report's read contract; its reading() is a snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.report.store_contract import ReportStoreContract, assert_one_snapshot
from tidegate.state.base import StateStore
from tidegate.state.sqlite import SQLiteStateStore


class TestSQLiteReport(ReportStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[StateStore]:
        opened = SQLiteStateStore(tmp_path / ".tidegate" / "state.db")
        try:
            yield opened
        finally:
            opened.close()


def test_reading_sees_one_snapshot_while_another_process_writes(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    reader, writer = SQLiteStateStore(path), SQLiteStateStore(path)
    try:
        assert_one_snapshot(reader, writer)
    finally:
        reader.close()
        writer.close()
