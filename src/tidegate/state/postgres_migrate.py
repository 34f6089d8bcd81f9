"""The PostgreSQL ledger's numbered migrations (migrations_postgres/, the same numbers, tables
and columns as the SQLite ledger's migrations/), applied under an advisory lock."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from tidegate.domain.errors import StateStoreError
from tidegate.state.ledger_migrations import numbered_scripts

# pg_advisory_xact_lock(MIGRATION_LOCK, hashtext(schema)): one process at a time creates the
# schema and migrates it. Several processes opening a new ledger at once queue here; the first
# migrates, the others find it done. Released with the transaction, also if a process dies.
MIGRATION_LOCK = 0x7464_0001  # an int4 "class" of tidegate's own

SCHEMA_MIGRATIONS = (
    "CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, "
    "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
)


def migrations() -> list[tuple[int, str]]:
    """Numbered migration scripts of the PostgreSQL ledger shipped with tidegate, in order."""
    return numbered_scripts("migrations_postgres")


SCHEMA_VERSION = max(number for number, _ in migrations())


def migrate(con: psycopg.Connection[Any], schema: str, where: str) -> None:
    """Create `schema` if it is missing, point the session at it and bring it to
    SCHEMA_VERSION, in one transaction. Raises StateStoreError, changing nothing, when the
    ledger was written by a newer tidegate."""
    with con.transaction():
        con.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (MIGRATION_LOCK, schema))
        exists = con.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        if exists.fetchone() is None:
            con.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        # the session's only schema: the ledger's tables never resolve to another schema's
        con.execute("SELECT set_config('search_path', quote_ident(%s), false)", (schema,))
        table = con.execute("SELECT to_regclass('schema_migrations')").fetchone()
        if table is None or table[0] is None:
            con.execute(SCHEMA_MIGRATIONS)
        # by the numbers applied, not the highest: a number below it that arrives later (a
        # migration reserved on another branch) is applied too
        rows = con.execute("SELECT version FROM schema_migrations").fetchall()
        applied = {int(r[0]) for r in rows}
        current = max(applied, default=0)
        if current > SCHEMA_VERSION:
            raise StateStoreError(
                f"state store {where} has schema v{current}, newer than this tidegate "
                f"supports (v{SCHEMA_VERSION}); upgrade tidegate"
            )
        for number, script in migrations():
            if number not in applied:
                con.execute(script)  # several statements: no parameters, one simple query
                con.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (number,))
