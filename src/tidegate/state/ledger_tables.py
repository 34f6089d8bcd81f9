"""What the table groups shared by both ledgers ask of a store: its transactions and reads.

The shared groups (ledger_*.py) write each statement once, in SQLite's placeholder style: `?`
for a positional parameter, `:name` for a named one. A store runs that text as it is (SQLite)
or converts its placeholders first (PostgreSQL, see postgres_tables.Session). The statement
text is portable SQL: `ON CONFLICT DO NOTHING` rather than SQLite's `INSERT OR IGNORE`,
`CAST(:x AS TEXT) IS NULL` for an optional filter (PostgreSQL must know a parameter's type).
What only one store does (PostgreSQL's advisory locks, its ledger clock and server-side
cursors, SQLite's BEGIN IMMEDIATE and its JSON functions) stays in that store's own files,
as hooks the shared groups call (`_move_attempt`, `_hold_marks`, `_insert_outbox`) or as
whole methods."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

Params = Sequence[Any] | Mapping[str, Any]


class LedgerTables:
    """The dialect interface: each store supplies these (sqlite_tables, postgres_tables). Declared
    for the type checker only, so that a store's own definitions are the ones that run."""

    if TYPE_CHECKING:

        def _tx(self) -> AbstractContextManager[Any]:
            """One write transaction; nothing of it stays if its body raises."""

        def _read_tx(self) -> AbstractContextManager[Any]:
            """One connection for reads that take several statements."""

        def _all(self, query: str, params: Params = ()) -> list[Any]: ...

        def _one(self, query: str, params: Params = ()) -> Any | None: ...
