"""The leases' fences of a Spark warehouse (docs/design.md §7), in a small SQL database: a
SQLite file beside the tables by default, or the PostgreSQL database of the Iceberg catalog,
which several machines share.

A lease's token per partition: each new lease raises it, and a publish holds its own in one
transaction while main moves, so that a worker that slept past its lease never publishes
whichever run later took the partitions.

Spark once published into tables of tidegate's own, switched by pointers in this database;
a warehouse that still holds them is refused, with how to backfill it into Iceberg tables.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidegate.domain.errors import EngineError, FencedError, UsageError
from tidegate.engines.base import Fence

FENCES_DDL = """
CREATE TABLE IF NOT EXISTS tidegate_spark_fences (
    warehouse TEXT NOT NULL,
    fence_key TEXT NOT NULL,
    token BIGINT NOT NULL,
    PRIMARY KEY (warehouse, fence_key)
)"""
ADD_FENCE = """
INSERT INTO tidegate_spark_fences (warehouse, fence_key, token) VALUES (?, ?, 0)
ON CONFLICT (warehouse, fence_key) DO NOTHING"""
RAISE_FENCE = """
UPDATE tidegate_spark_fences SET token = ?
WHERE warehouse = ? AND fence_key = ? AND token < ?"""
HOLD_FENCE = """
UPDATE tidegate_spark_fences SET token = token
WHERE warehouse = ? AND fence_key = ? AND token = ?"""
# the retired format's table of pointers (it publishes nothing any more)
POINTERS_TABLE = "tidegate_spark_pointers"
ANY_POINTER = "SELECT 1 FROM tidegate_spark_pointers WHERE warehouse = ? LIMIT 1"
RETIRED_HINT = (
    "Spark now publishes Apache Iceberg tables: point [warehouse] location at a new folder and "
    "backfill the models into it (`tidegate backfill MODEL --partitions …`); "
    "docs/engines/spark.md says more"
)


class Fences:
    """The fences of one warehouse (its location), on one connection: one per engine handle."""

    # `con`: a sqlite3 or psycopg connection in autocommit mode (transactions are explicit)
    def __init__(self, warehouse: str, con: Any, placeholder: str, kind: str) -> None:
        self.warehouse = warehouse
        self._con = con
        self._placeholder = placeholder
        self._kind = kind
        self._execute(FENCES_DDL)

    def _execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        text = statement if self._placeholder == "?" else statement.replace("?", "%s")
        try:
            return self._con.execute(text, tuple(params))
        except Exception as error:
            if not _is_driver_error(error):
                raise
            raise EngineError(f"spark fences: {_first_line(error)}") from error

    def refuse_pointers(self, where: str) -> None:
        """UsageError when this database holds the retired format's pointers of the warehouse."""
        if self._kind == "sqlite":
            exists = self._execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [POINTERS_TABLE]
            ).fetchall()
        else:
            exists = self._execute("SELECT to_regclass(?)", [POINTERS_TABLE]).fetchall()
            exists = [row for row in exists if row[0] is not None]
        if not exists:
            return
        found = self._execute(ANY_POINTER, [self.warehouse]).fetchall()
        if found:
            raise UsageError(
                f"the Spark warehouse {self.warehouse} publishes into tidegate's former pointer "
                f"tables ({where}): {RETIRED_HINT}"
            )

    @contextmanager
    def holding(self, fence: Fence) -> Iterator[None]:
        """A transaction in which the lease's token is still each of its partitions' newest
        (FencedError otherwise): their fence rows stay locked until it commits, so that no
        newer lease is granted while what it guards commits."""
        with self._transaction():
            for key in sorted(fence.keys):
                held = self._execute(HOLD_FENCE, [self.warehouse, key, fence.token])
                if held.rowcount != 1:
                    raise FencedError(
                        f"fenced: a newer lease holds partition {key.rsplit('/', 1)[-1]} "
                        f"(token {fence.token} is stale); nothing was published"
                    )
            yield

    def raise_fence(self, fence: Fence) -> None:
        """Raise the fences of the lease's partitions to its token, in one transaction."""
        with self._transaction():
            for key in sorted(fence.keys):  # one order for every writer: no deadlock
                self._execute(ADD_FENCE, [self.warehouse, key])
                self._execute(RAISE_FENCE, [fence.token, self.warehouse, key, fence.token])

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        # SQLite: BEGIN IMMEDIATE takes the write lock first, so two writers queue; PostgreSQL:
        # each fence row is updated conditionally, which waits for a concurrent transaction
        # holding that row and then re-checks its token.
        self._execute("BEGIN IMMEDIATE" if self._kind == "sqlite" else "BEGIN")
        try:
            yield
        except BaseException:
            self._execute("ROLLBACK")
            raise
        self._execute("COMMIT")

    def close(self) -> None:
        self._con.close()


def _is_driver_error(error: Exception) -> bool:
    if isinstance(error, sqlite3.Error):
        return True
    return type(error).__module__.startswith("psycopg")


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@dataclass(frozen=True)
class FencesPlace:
    """Where a warehouse's fences are: a SQLite file, or a PostgreSQL DSN (with the password
    from the environment, never shown)."""

    warehouse: str
    sqlite: Path | None = None
    dsn: str | None = None
    password: str | None = None

    @property
    def label(self) -> str:
        return str(self.sqlite) if self.sqlite is not None else str(self.dsn)

    def __repr__(self) -> str:
        return f"FencesPlace({self.warehouse!r}, {self.label!r})"

    def open(self) -> Fences:
        if self.sqlite is not None:
            return _open_sqlite(self.warehouse, self.sqlite)
        return _open_postgres(self.warehouse, str(self.dsn), self.password)


def _open_sqlite(warehouse: str, path: Path) -> Fences:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit (transactions are explicit); handles move between worker threads
        con = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA journal_mode = WAL")
    except (OSError, sqlite3.Error) as error:
        raise UsageError(f"cannot open the spark fences {path}: {_first_line(error)}") from None
    return Fences(warehouse, con, "?", "sqlite")


def _open_postgres(warehouse: str, dsn: str, password: str | None) -> Fences:
    try:
        import psycopg
    except ImportError:
        raise UsageError(
            "a catalog in PostgreSQL needs psycopg: pip install 'tidegate[iceberg]'"
        ) from None
    options: dict[str, Any] = {"autocommit": True, "connect_timeout": 10}
    if password is not None:
        options["password"] = password
    try:
        con = psycopg.connect(dsn, **options)
    except psycopg.Error as error:
        # libpq's message names host and database, never the password
        raise UsageError(f"cannot connect to the catalog {dsn}: {_first_line(error)}") from None
    return Fences(warehouse, con, "%s", "postgres")


def fences_place(
    warehouse: str, default_file: Path, dsn: str | None, password_env: str | None
) -> FencesPlace:
    """The fences of the configuration: the catalog's PostgreSQL database, else the default
    SQLite file."""
    if dsn is None:
        return FencesPlace(warehouse, sqlite=default_file)
    password = None
    if password_env is not None:
        password = os.environ.get(password_env)
        if password is None:
            raise UsageError(f"the environment variable {password_env} (password_env) is not set")
    return FencesPlace(warehouse, dsn=dsn, password=password)
