"""The Spark warehouse's catalog: which attempt directory holds each partition of each table
(the pointers), the tables' columns and the commit markers, in a small SQL database — a SQLite
file beside the data by default, or a PostgreSQL database that several machines share.

A publish switches its partitions' pointers and inserts its markers in one transaction of this
database, each pointer by compare-and-swap against the directory the writer read before it
wrote: a writer that lost a race switches nothing (docs/design.md §7). Readers follow the pointers,
so a directory is visible only once it is complete; directories no pointer names are garbage.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import astuple, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tidegate.domain.errors import EngineError, FencedError, UsageError
from tidegate.domain.model import Column
from tidegate.engines.base import EVERY, CommitMarker, Fence
from tidegate.sql.statements import select_markers, table

TABLES_DDL = """
CREATE TABLE IF NOT EXISTS tidegate_spark_tables (
    warehouse TEXT NOT NULL,
    schema_name TEXT NOT NULL,
    table_name TEXT NOT NULL,
    columns TEXT NOT NULL,
    PRIMARY KEY (warehouse, schema_name, table_name)
)"""
POINTERS_DDL = """
CREATE TABLE IF NOT EXISTS tidegate_spark_pointers (
    warehouse TEXT NOT NULL,
    schema_name TEXT NOT NULL,
    table_name TEXT NOT NULL,
    slot TEXT NOT NULL,
    directory TEXT NOT NULL,
    attempt_id TEXT,
    swapped_at TEXT NOT NULL,
    PRIMARY KEY (warehouse, schema_name, table_name, slot)
)"""
MARKERS_DDL = """
CREATE TABLE IF NOT EXISTS tidegate_spark_markers (
    attempt_id TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    grain TEXT NOT NULL,
    partition_start BIGINT NOT NULL,
    partition_end BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    version_id TEXT NOT NULL,
    checksum TEXT NOT NULL,
    published_at TEXT NOT NULL
)"""
# a lease's fencing token per partition (docs/design.md §7): a publish carrying an older one is
# refused
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
SELECT_COLUMNS = """
SELECT columns FROM tidegate_spark_tables
WHERE warehouse = ? AND schema_name = ? AND table_name = ?"""
UPSERT_COLUMNS = """
INSERT INTO tidegate_spark_tables (warehouse, schema_name, table_name, columns)
VALUES (?, ?, ?, ?)
ON CONFLICT (warehouse, schema_name, table_name) DO UPDATE SET columns = excluded.columns"""
SELECT_POINTERS = """
SELECT slot, directory FROM tidegate_spark_pointers
WHERE warehouse = ? AND schema_name = ? AND table_name = ?
ORDER BY slot"""
SWAP_POINTER = """
UPDATE tidegate_spark_pointers SET directory = ?, attempt_id = ?, swapped_at = ?
WHERE warehouse = ? AND schema_name = ? AND table_name = ? AND slot = ? AND directory = ?"""
NEW_POINTER = """
INSERT INTO tidegate_spark_pointers
    (directory, attempt_id, swapped_at, warehouse, schema_name, table_name, slot)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (warehouse, schema_name, table_name, slot) DO NOTHING"""
INSERT_MARKER = """
INSERT INTO tidegate_spark_markers
    (attempt_id, model, grain, partition_start, partition_end, run_id, version_id, checksum,
     published_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"""
SELECT_MARKERS_OF = """
SELECT attempt_id, model, grain, partition_start, partition_end, run_id, version_id, checksum,
       published_at
FROM tidegate_spark_markers WHERE model = ? AND partition_start >= ? AND partition_start < ?
ORDER BY partition_start, attempt_id"""
MARKERS_TABLE = "tidegate_spark_markers"
MARKERS_PER_QUERY = 500
SELECT_MARKED_START = """
SELECT 1 FROM tidegate_spark_markers WHERE model = ? AND partition_start = ?"""
DEFAULT_SCHEMA = ""
# The directory of a partition without rows: a pointer to nothing
EMPTY = ""


@dataclass(frozen=True)
class Swap:
    """One pointer to switch: the slot (a partition) of a table, the directory the writer saw
    there before it wrote (None: none yet), and the new one."""

    slot: str
    expected: str | None
    directory: str
    attempt_id: str | None


class Catalog:
    """The catalog of one warehouse (its location), on one connection: one per engine handle."""

    # `con`: a sqlite3 or psycopg connection in autocommit mode (transactions are explicit)
    def __init__(self, warehouse: str, con: Any, placeholder: str, kind: str) -> None:
        self.warehouse = warehouse
        self._con = con
        self._placeholder = placeholder
        self._kind = kind
        for statement in (TABLES_DDL, POINTERS_DDL, MARKERS_DDL, FENCES_DDL):
            self._execute(statement)

    def _text(self, statement: str) -> str:
        return statement if self._placeholder == "?" else statement.replace("?", "%s")

    def _execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        try:
            return self._con.execute(self._text(statement), tuple(params))
        except Exception as error:
            if not _is_driver_error(error):
                raise
            raise EngineError(f"spark catalog: {_first_line(error)}") from error

    def columns(self, name: str, schema: str | None = None) -> list[Column] | None:
        rows = self._execute(SELECT_COLUMNS, self._table(name, schema)).fetchall()
        if not rows:
            return None
        return [Column(n, t, bool(nullable)) for n, t, nullable in json.loads(rows[0][0])]

    def pointers(self, name: str, schema: str | None = None) -> dict[str, str]:
        """Slot → directory (relative to the warehouse location) of a table's partitions."""
        rows = self._execute(SELECT_POINTERS, self._table(name, schema)).fetchall()
        return {str(r[0]): str(r[1]) for r in rows}

    def markers(self, attempt_ids: Sequence[str]) -> dict[str, CommitMarker]:
        found: dict[str, CommitMarker] = {}
        ids = list(dict.fromkeys(attempt_ids))
        # a batch's reads ask for many at once: one statement per chunk, within the
        # drivers' limits on bound parameters
        for offset in range(0, len(ids), MARKERS_PER_QUERY):
            chunk = ids[offset : offset + MARKERS_PER_QUERY]
            for row in self._execute(_select_markers(len(chunk)), chunk).fetchall():
                marker = CommitMarker(*row)
                found[marker.attempt_id] = marker
        return found

    def markers_of(
        self, model: str, start: int = EVERY[0], end: int = EVERY[1]
    ) -> list[CommitMarker]:
        rows = self._execute(SELECT_MARKERS_OF, [model, start, end]).fetchall()
        return [CommitMarker(*row) for row in rows]

    def marked_starts(self, model: str, starts: Sequence[int]) -> list[int]:
        """Of these partition starts of a model, those that have a commit marker."""
        return [s for s in starts if self._execute(SELECT_MARKED_START, [model, s]).fetchall()]

    def swap(
        self,
        name: str,
        schema: str | None,
        columns: Sequence[Column],
        swaps: Sequence[Swap],
        markers: Sequence[CommitMarker],
        fence: Fence | None = None,
    ) -> None:
        """In one transaction: check the fence (a lease's token must still be each of its
        partitions' newest), record the table's columns, switch each pointer from what its
        writer expected to the new directory, and insert the markers. Raises EngineError, with
        nothing switched, when another writer switched a pointer first or a marker's attempt
        published already, FencedError when a newer lease holds one of the partitions."""
        table = self._table(name, schema)
        stamp = datetime.now(timezone.utc).isoformat()
        encoded = json.dumps([[c.name, c.type, c.nullable] for c in columns])
        with self.holding(fence):
            self._execute(UPSERT_COLUMNS, [*table, encoded])
            for swap in swaps:
                new = [swap.directory, swap.attempt_id, stamp, *table, swap.slot]
                if swap.expected is None:
                    switched = self._execute(NEW_POINTER, new)
                else:
                    switched = self._execute(SWAP_POINTER, [*new, swap.expected])
                if switched.rowcount != 1:
                    raise EngineError(
                        f"spark: {name}: partition {swap.slot} was published by another "
                        "writer meanwhile; nothing of this publish is visible"
                    )
            for marker in markers:
                if self.markers([marker.attempt_id]):
                    raise EngineError(
                        f"spark: attempt {marker.attempt_id} published already "
                        "(one commit marker per attempt)"
                    )
                self._execute(INSERT_MARKER, astuple(marker))

    @contextmanager
    def holding(self, fence: Fence | None) -> Iterator[None]:
        """A transaction in which the lease's token is still each of its partitions' newest
        (FencedError otherwise): their fence rows stay locked until it commits, so that no
        newer lease is granted while what it guards commits."""
        with self._transaction():
            if fence is not None:
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
        # SQLite: BEGIN IMMEDIATE takes the write lock first, so two writers' swaps queue;
        # PostgreSQL: each pointer row is switched by a conditional UPDATE, which waits for a
        # concurrent transaction holding that row and then re-checks the expected directory.
        self._execute("BEGIN IMMEDIATE" if self._kind == "sqlite" else "BEGIN")
        try:
            yield
        except BaseException:
            self._execute("ROLLBACK")
            raise
        self._execute("COMMIT")

    def _table(self, name: str, schema: str | None) -> list[str]:
        return [self.warehouse, schema or DEFAULT_SCHEMA, name]

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
class CatalogPlace:
    """Where a warehouse's catalog is: a SQLite file, or a PostgreSQL DSN (with the password
    from the environment, never shown)."""

    warehouse: str
    sqlite: Path | None = None
    dsn: str | None = None
    password: str | None = None

    @property
    def label(self) -> str:
        return str(self.sqlite) if self.sqlite is not None else str(self.dsn)

    def __repr__(self) -> str:
        return f"CatalogPlace({self.warehouse!r}, {self.label!r})"

    def open(self) -> Catalog:
        if self.sqlite is not None:
            return _open_sqlite(self.warehouse, self.sqlite)
        return _open_postgres(self.warehouse, str(self.dsn), self.password)


def _open_sqlite(warehouse: str, path: Path) -> Catalog:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit (transactions are explicit); handles move between worker threads
        con = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA journal_mode = WAL")
    except (OSError, sqlite3.Error) as error:
        raise UsageError(f"cannot open the spark catalog {path}: {_first_line(error)}") from None
    return Catalog(warehouse, con, "?", "sqlite")


def _open_postgres(warehouse: str, dsn: str, password: str | None) -> Catalog:
    try:
        import psycopg
    except ImportError:
        raise UsageError(
            "a spark catalog in PostgreSQL needs psycopg: pip install 'tidegate[postgres]'"
        ) from None
    options: dict[str, Any] = {"autocommit": True, "connect_timeout": 10}
    if password is not None:
        options["password"] = password
    try:
        con = psycopg.connect(dsn, **options)
    except psycopg.Error as error:
        # libpq's message names host and database, never the password
        raise UsageError(
            f"cannot connect to the spark catalog {dsn}: {_first_line(error)}"
        ) from None
    return Catalog(warehouse, con, "%s", "postgres")


def catalog_place(
    warehouse: str, default_file: Path | None, dsn: str | None, password_env: str | None
) -> CatalogPlace:
    """The catalog of the configuration: the DSN's database, else the default SQLite file."""
    if dsn is None:
        if default_file is None:
            raise UsageError("a spark warehouse at a URI needs catalog = postgresql://…")
        return CatalogPlace(warehouse, sqlite=default_file)
    password = None
    if password_env is not None:
        password = os.environ.get(password_env)
        if password is None:
            raise UsageError(f"the environment variable {password_env} (password_env) is not set")
    return CatalogPlace(warehouse, dsn=dsn, password=password)


@functools.lru_cache(maxsize=8)
def _select_markers(count: int) -> str:
    return select_markers(count, target=table(MARKERS_TABLE))
