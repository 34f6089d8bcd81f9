"""Opening the project's state store: the SQLite file (the default), or the PostgreSQL ledger
`[state] url` names."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from tidegate.domain.errors import UsageError

if TYPE_CHECKING:
    from tidegate.state.base import StateStore


class LedgerSection(Protocol):
    """Where the ledger is: the project file's `[state]` section, or the project cache's copy
    of it."""

    @property
    def path(self) -> str: ...
    @property
    def url(self) -> str | None: ...
    @property
    def db_schema(self) -> str: ...
    @property
    def password_env(self) -> str | None: ...


def open_state(root: Path, section: LedgerSection) -> StateStore:
    if section.url is None:
        from tidegate.state.sqlite import SQLiteStateStore

        return SQLiteStateStore(root / section.path)
    try:
        # psycopg is imported here only: every other store starts without it
        from tidegate.state.postgres import PostgresStateStore
        from tidegate.state.postgres_connect import PostgresTarget
    except ImportError as error:
        if not (error.name or "").startswith("psycopg"):
            raise
        raise UsageError(
            "[state] url needs PostgreSQL support: pip install 'tidegate[postgres]'"
        ) from None
    return PostgresStateStore(PostgresTarget(section.url, section.db_schema, section.password_env))
