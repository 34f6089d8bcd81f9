"""Reaching the PostgreSQL ledger: its address, the password from the environment, and every
failure of the server as one line with the exit code it deserves."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from tidegate.domain.errors import (
    BusyError,
    OperationFailed,
    StateStoreError,
    TidegateError,
    UsageError,
)

CONNECT_TIMEOUT_SECONDS = 10

# SQLSTATEs that mean "the server is there but cannot take us now": retry later (exit 4).
BUSY_STATES = frozenset(
    {
        "53300",  # too_many_connections
        "53400",  # configuration_limit_exceeded
        "57P03",  # cannot_connect_now (starting up, shutting down, in recovery)
        "55P03",  # lock_not_available
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "57014",  # query_canceled (a statement_timeout the server enforces)
    }
)


@dataclass(frozen=True)
class PostgresTarget:
    """Where the ledger lives. `url` holds no password (the configuration refuses one)."""

    url: str
    schema: str = "tidegate_state"
    password_env: str | None = None

    @property
    def where(self) -> str:
        return f"{self.url} (schema {self.schema})"

    def connect_args(self, env: Mapping[str, str]) -> dict[str, Any]:
        """Keyword arguments of psycopg.connect besides the URL: the password read from the
        environment variable the configuration names (never kept anywhere else)."""
        try:
            given = conninfo_to_dict(self.url)
        except psycopg.ProgrammingError as error:
            raise UsageError(f"state.url: not a PostgreSQL URL ({one_line(error)})") from None
        if "password" in given:
            raise UsageError(
                "state.url: must not hold a password; name an environment variable in "
                "password_env (or use PGPASSWORD or ~/.pgpass)"
            )
        found: dict[str, Any] = {"application_name": "tidegate"}
        if "connect_timeout" not in given:
            found["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
        if self.password_env is not None:
            password = env.get(self.password_env)
            if password is None:
                raise UsageError(
                    f"state.password_env: environment variable {self.password_env} is not set"
                )
            found["password"] = password
        return found


def connect(
    target: PostgresTarget, env: Mapping[str, str] | None = None
) -> psycopg.Connection[Any]:
    """An autocommit connection (each method opens its own transaction)."""
    args = target.connect_args(os.environ if env is None else env)
    try:
        return psycopg.connect(target.url, autocommit=True, **args)
    except psycopg.Error as error:
        raise failure(error, target.where, "cannot connect") from None


def failure(error: psycopg.Error, where: str, doing: str) -> TidegateError:
    """One line for a failure of the server: busy (exit 4) when retrying later may succeed,
    otherwise unusable as it is (exit 2)."""
    text = one_line(error)
    if error.sqlstate in BUSY_STATES or _says_busy(text):
        return BusyError(f"state store {where} is busy: {text}; retry later")
    return StateStoreError(f"state store {where}: {doing}: {text}")


# SQLSTATEs of a session the server ended under a statement (an administrator's
# pg_terminate_backend, a crash, a broken link); without one, the client saw the link die
LOST_STATES = frozenset({"57P01", "57P02", "08000", "08003", "08006"})


def statement_failure(error: psycopg.Error, where: str) -> TidegateError:
    """One line for a statement of an open ledger that failed. A connection lost under it
    failed the operation (exit 1), not the configuration: the ledger is fine, nothing of the
    transaction stayed, and what was running resumes."""
    lost = error.sqlstate in LOST_STATES or (
        error.sqlstate is None and isinstance(error, psycopg.OperationalError)
    )
    if lost and error.sqlstate not in BUSY_STATES:
        return OperationFailed(
            f"state store {where}: the connection was lost ({one_line(error)}); nothing of the "
            "statement stayed — resume what was running"
        )
    return failure(error, where, "failed")


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _says_busy(text: str) -> bool:
    # a refused connection carries no SQLSTATE to the client: recognize the server's words
    lowered = text.lower()
    return any(
        words in lowered
        for words in (
            "too many clients",
            "too many connections",
            "remaining connection slots are reserved",
            "the database system is starting up",
            "the database system is shutting down",
        )
    )
