"""The embedded ledger: SQLite in WAL mode, with numbered schema migrations."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from tidegate.domain.errors import StateStoreError
from tidegate.state.ledger_commands import CommandTables
from tidegate.state.ledger_cursors import CursorTables
from tidegate.state.ledger_gates import GateTables
from tidegate.state.ledger_migrations import numbered_scripts
from tidegate.state.ledger_runs import RunTables
from tidegate.state.ledger_streams import StreamTables
from tidegate.state.sqlite_attempts import AttemptTables
from tidegate.state.sqlite_outbox import OutboxTables
from tidegate.state.sqlite_partitions import PartitionTables
from tidegate.state.sqlite_queue import QueueTables
from tidegate.state.sqlite_report import ReportTables
from tidegate.state.sqlite_tables import SQLiteTables, ledger_failure

BUSY_TIMEOUT_MS = 30_000


def migrations() -> list[tuple[int, str]]:
    """Numbered migration scripts shipped with tidegate, in order."""
    return numbered_scripts("migrations")


SCHEMA_VERSION = max(number for number, _ in migrations())


class SQLiteStateStore(
    CommandTables,
    CursorTables,
    GateTables,
    RunTables,
    StreamTables,
    AttemptTables,
    PartitionTables,
    OutboxTables,
    QueueTables,
    ReportTables,
    SQLiteTables,
):
    """The embedded ledger, one SQLite file in WAL mode."""

    def __init__(self, path: Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.path = path
        # One connection shared by the coordinator and worker threads, one statement at a time.
        self._lock = threading.RLock()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = sqlite3.connect(
                path,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            self._con.row_factory = sqlite3.Row
            # the ledger's clock for leases (ledger_queue): this machine's, the file's host
            self._con.create_function("ledger_now_ms", 0, _now_ms, deterministic=False)
            self._con.execute("PRAGMA journal_mode = WAL")
            self._con.execute("PRAGMA synchronous = NORMAL")
            self._con.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.DatabaseError as error:
            found = ledger_failure(path, error)
            if not isinstance(found, StateStoreError):  # busy, or a full disk: the file is fine
                raise found from None
            raise StateStoreError(
                f"state store {path} is unreadable ({error}); restore it from a backup or move "
                "it aside — tidegate rebuilds nothing silently"
            ) from None

    def _migrate(self) -> None:
        self._con.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        )
        # by the numbers applied, not the highest: a number below it that arrives later (a
        # migration reserved on another branch) is applied too
        rows = self._con.execute("SELECT version FROM schema_migrations")
        applied = {int(r[0]) for r in rows.fetchall()}
        current = max(applied, default=0)
        if current > SCHEMA_VERSION:
            raise StateStoreError(
                f"state store {self.path} has schema v{current}, newer than this tidegate "
                f"supports (v{SCHEMA_VERSION}); upgrade tidegate"
            )
        for number, script in migrations():
            if number in applied:
                continue
            with self._tx() as con:
                for statement in script.split(";\n"):
                    if statement.strip():
                        con.execute(statement)
                con.execute("INSERT INTO schema_migrations (version) VALUES (?)", (number,))

    def close(self) -> None:
        self._con.close()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
