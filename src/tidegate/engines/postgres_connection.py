"""Connecting to a PostgreSQL warehouse: the session settings every handle shares, and the
writer's advisory lock that keeps one writing process per warehouse database (docs/design.md §7,
G7)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

import psycopg

from tidegate.domain.errors import BusyError, UsageError
from tidegate.sql import postgres as pg

WAIT_STEP_SECONDS = 0.2
CONNECT_TIMEOUT_SECONDS = 10


@dataclass(frozen=True)
class Warehouse:
    """Where a PostgreSQL warehouse is: a DSN without a password, the schema of published
    tables and, when given, the password (never shown: not in repr, messages or the ledger)."""

    dsn: str
    schema: str = "public"
    password: str | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        """The warehouse as messages name it: no password, no connection options."""
        parts = urlsplit(self.dsn)
        host = parts.hostname or "localhost"
        where = f"{host}:{parts.port}" if parts.port else host
        user = f"{parts.username}@" if parts.username else ""
        return f"postgresql://{user}{where}{parts.path or '/'} (schema {self.schema})"


def warehouse_of(dsn: str, schema: str, password_env: str | None) -> Warehouse:
    """The configured warehouse, its password read from the environment variable named by
    `password_env` (none: libpq's PGPASSWORD and ~/.pgpass apply)."""
    password = None
    if password_env is not None:
        password = os.environ.get(password_env)
        if password is None:
            raise UsageError(
                f"warehouse.password_env names {password_env}, which is not set in the environment"
            )
    return Warehouse(dsn, schema, password)


def connect(
    warehouse: Warehouse, read_only: bool, idle_seconds: float | None = None
) -> psycopg.Connection[tuple[object, ...]]:
    """A session on the warehouse: autocommit (publishes open their own transaction), UTC,
    unqualified names in the warehouse's schema, read-only when asked; with `idle_seconds`, a
    transaction left idle that long is ended by the server (a worker stopped mid-publish must
    not hold its locks past its lease). Raises UsageError (one line, no secret) when the server
    cannot be reached or refuses the session."""
    options: dict[str, object] = {
        "autocommit": True,
        # statements are cached by text in the engine; server-side prepared statements would
        # outlive the staging tables they name, which are dropped and made again
        "prepare_threshold": None,
        "application_name": "tidegate",
    }
    if "connect_timeout" not in {k.lower() for k, _ in parse_qsl(urlsplit(warehouse.dsn).query)}:
        options["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
    if warehouse.password is not None:
        options["password"] = warehouse.password
    try:
        con = psycopg.connect(warehouse.dsn, **options)  # type: ignore[arg-type]
    except psycopg.Error as error:
        message = f"cannot connect to warehouse {warehouse.label}: {_first_line(error)}"
        if _is_busy(error):
            raise BusyError(f"{message}; retry later") from None
        raise UsageError(message) from None
    try:
        setting = pg.set_setting()
        con.execute(setting, ["TimeZone", "UTC"])
        con.execute(setting, ["search_path", pg.search_path(warehouse.schema)])
        if read_only:
            con.execute(setting, ["default_transaction_read_only", "on"])
        if idle_seconds is not None:
            timeout = f"{max(1, round(idle_seconds * 1000))}ms"
            con.execute(setting, ["idle_in_transaction_session_timeout", timeout])
    except psycopg.Error as error:
        con.close()
        raise UsageError(f"warehouse {warehouse.label}: {_first_line(error)}") from None
    return con


def hold_writer_lock(
    con: psycopg.Connection[tuple[object, ...]],
    warehouse: Warehouse,
    wait: bool,
    wait_timeout: float | None,
    on_wait: Callable[[str], None] | None,
    shared: bool = False,
) -> None:
    """Take the warehouse's writer lock for this session's life (a session-level advisory lock:
    released when the session ends, a crash included), or its shared form for a worker of a
    distributed run. Raises BusyError when another writer holds it (for a shared lock: a single
    writer), at once or, with `wait`, after `wait_timeout` seconds (None: never)."""
    deadline = None if wait_timeout is None else time.monotonic() + wait_timeout
    announced = False
    statement = pg.try_writer_lock(shared)
    while True:
        try:
            row = con.execute(statement, []).fetchone()
        except psycopg.Error as error:
            raise UsageError(f"warehouse {warehouse.label}: {_first_line(error)}") from None
        if row is not None and row[0]:
            return
        if not wait or (deadline is not None and time.monotonic() > deadline):
            raise BusyError(
                f"warehouse {warehouse.label} is in use by another tidegate process; "
                "retry later or pass --wait"
            )
        if on_wait is not None and not announced:
            on_wait(f"waiting for warehouse {warehouse.label}: another tidegate process holds it")
            announced = True
        time.sleep(WAIT_STEP_SECONDS)


# The server cannot take a session now (too many clients; starting up or shutting down): busy,
# worth a retry, unlike a refusal (unknown role or database, authentication).
BUSY_STATES = frozenset({"53300", "57P03"})
BUSY_TEXTS = ("too many clients", "remaining connection slots", "the database system is starting")


def _is_busy(error: psycopg.Error) -> bool:
    text = str(error).lower()
    return error.sqlstate in BUSY_STATES or any(t in text for t in BUSY_TEXTS)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
