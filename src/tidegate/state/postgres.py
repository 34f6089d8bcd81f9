"""The shared ledger: PostgreSQL, reached by many processes on many machines, with numbered
schema migrations of its own (migrations_postgres/, the same as the SQLite ledger's).

Imported only when `[state] url` names a PostgreSQL server: psycopg stays out of every other
command's start-up."""

from __future__ import annotations

from collections.abc import Mapping

import psycopg

from tidegate.state.ledger_commands import CommandTables
from tidegate.state.ledger_cursors import CursorTables
from tidegate.state.ledger_gates import GateTables
from tidegate.state.ledger_runs import RunTables
from tidegate.state.ledger_streams import StreamTables
from tidegate.state.postgres_attempts import AttemptTables
from tidegate.state.postgres_connect import PostgresTarget, failure
from tidegate.state.postgres_migrate import migrate
from tidegate.state.postgres_outbox import OutboxTables
from tidegate.state.postgres_partitions import PartitionTables
from tidegate.state.postgres_pool import Connections
from tidegate.state.postgres_queue import QueueTables
from tidegate.state.postgres_report import ReportTables
from tidegate.state.postgres_tables import PostgresTables


class PostgresStateStore(
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
    PostgresTables,
):
    """The ledger in one schema of a PostgreSQL database. Opening it migrates the schema (see
    postgres_migrate); raises StateStoreError (exit 2) when the server is down, refuses or
    holds a newer ledger, BusyError (exit 4) when it cannot take a connection now."""

    def __init__(self, target: PostgresTarget, env: Mapping[str, str] | None = None) -> None:
        self.target = target
        self.where = target.where
        self._pool = Connections(target, env)
        try:
            with self._pool.session() as con:
                migrate(con, target.schema, self.where)
        except psycopg.Error as error:
            self._pool.close()
            raise failure(error, self.where, "cannot be opened") from None
        except BaseException:
            self._pool.close()
            raise

    def close(self) -> None:
        self._pool.close()
