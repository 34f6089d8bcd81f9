"""Direct reads of a project's two stores, the ledger and the warehouse, wherever they are
(SQLite or PostgreSQL; DuckDB or PostgreSQL), so the chaos invariants are written once.

They never go through tidegate: a test must see what a killed process really left behind."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.engines.postgres_kit import admin
from tests.faults.ledger import ledger_rows
from tests.kit import warehouse_rows

LEDGER_SCHEMA = "ledger"  # where tests/distributed/kit.shared_project puts a PostgreSQL ledger


@dataclass(frozen=True)
class Stores:
    project: Path
    warehouse_dsn: str | None = None  # None: the project's DuckDB file
    ledger_dsn: str | None = None  # None: the project's SQLite file

    def warehouse(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """`query` with `?` placeholders, on the warehouse."""
        if self.warehouse_dsn is None:
            return warehouse_rows(self.project, query, list(params))
        return _postgres(self.warehouse_dsn, None, query, params)

    def ledger(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """`query` with `?` placeholders, on the ledger."""
        if self.ledger_dsn is None:
            return ledger_rows(self.project, query, tuple(params))
        return _postgres(self.ledger_dsn, LEDGER_SCHEMA, query, params)

    def staging_tables(self) -> int:
        """Tables left in the warehouse's staging area (DuckDB stages in memory: none can be)."""
        if self.warehouse_dsn is None:
            return len(
                self.warehouse(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema "
                    "NOT IN ('main', '_tidegate', '_tidegate_shadow')"
                )
            )
        [(count,)] = self.warehouse(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_schema = '_tidegate_staging'"
        )
        return int(count)


def _postgres(
    dsn: str, schema: str | None, query: str, params: Sequence[Any]
) -> list[tuple[Any, ...]]:
    with admin(dsn) as con:
        if schema is not None:
            con.execute("SELECT set_config('search_path', %s, false)", (schema,))
        return [tuple(r) for r in con.execute(query.replace("?", "%s"), tuple(params)).fetchall()]
