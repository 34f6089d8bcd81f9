"""A cursor model over an append-only `events` source, on DuckDB or on a PostgreSQL database of
its own (named `cursor_…`, dropped after): the project, inserts into the source, and what the
target holds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from tests.kit import tidegate

MODEL = "event_amounts"

MODEL_SQL = """/* tidegate
grain = "cursor"
cursor_column = "id"
cursor_unique = true
write_mode = "append"
{extra}
[columns]
id = "BIGINT NOT NULL"
kind = "VARCHAR NOT NULL"
net = "DECIMAL(18, 2) NOT NULL"
*/
SELECT id, kind, CAST(amount * 2 AS DECIMAL(18, 2)) AS net
FROM events
WHERE id > $start AND id <= $end
"""

DUCKDB_EVENTS = (
    "CREATE TABLE events (id BIGINT NOT NULL, created_at TIMESTAMP NOT NULL, "
    "kind VARCHAR NOT NULL, amount DECIMAL(18, 2) NOT NULL)"
)
# ids come from a sequence, as an application's would: taken in time order, committed in any
POSTGRES_EVENTS = (
    "CREATE TABLE events (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
    "created_at TIMESTAMP NOT NULL DEFAULT now(), kind VARCHAR NOT NULL, "
    "amount DECIMAL(18, 2) NOT NULL)"
)


@dataclass(frozen=True)
class CursorProject:
    root: Path
    dsn: str | None  # None: the embedded DuckDB warehouse

    def tidegate(self, *args: str) -> Any:
        return tidegate(*args, "--project", self.root)

    def write_model(self, extra: str = "", sql: str | None = None) -> None:
        text = MODEL_SQL.format(extra=extra) if sql is None else sql
        (self.root / "models" / f"{MODEL}.sql").write_text(text)

    def execute(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        """One statement on the warehouse (DuckDB: while no tidegate holds the file)."""
        if self.dsn is None:
            con = duckdb.connect(str(self.root / "warehouse.duckdb"))
            try:
                cursor = con.execute(statement, params)
                return cursor.fetchall() if cursor.description else []
            finally:
                con.close()
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as pg:
            found = pg.execute(statement, params)
            return [tuple(r) for r in found.fetchall()] if found.description else []

    def insert(self, count: int) -> None:
        """`count` new events, with the next ids."""
        if self.dsn is None:
            self.execute(
                # id N is created at 2026-01-01 00:00:00 + N seconds
                "INSERT INTO events SELECT m + i, TIMESTAMP '2026-01-01' + (m + i) * INTERVAL 1 "
                "SECOND, 'k' || (i % 3), i * 1.25 "
                "FROM (SELECT coalesce(max(id), 0) AS m FROM events), range(1, ?) t(i)",
                [count + 1],
            )
        else:
            self.execute(
                "INSERT INTO events (kind, amount) "
                "SELECT 'k' || (i %% 3), i * 1.25 FROM generate_series(1, %s) AS t(i)",
                [count],
            )

    def source_ids(self) -> list[int]:
        return [r[0] for r in self.execute("SELECT id FROM events ORDER BY id")]

    def target_ids(self) -> list[int]:
        """Every id the target holds, repeats included, in order."""
        return [r[0] for r in self.execute(f"SELECT id FROM {MODEL} ORDER BY id")]

    def run(self) -> Any:
        result = self.tidegate("run", MODEL, "--json")
        assert result.exit_code == 0, result.stderr
        return result.json()


def cursor_project(root: Path, dsn: str | None = None, extra: str = "") -> CursorProject:
    """A project with the `events` source (empty) and the cursor model, built and deployed."""
    assert tidegate("init", root).exit_code == 0
    config = root / "tidegate.toml"
    text = config.read_text()
    if dsn is not None:
        text = text.replace(
            'engine = "duckdb"\npath = "warehouse.duckdb"\n',
            f'engine = "postgres"\ndsn = "{dsn}"\n',
        )
    config.write_text(text + '\n[sources.events]\ntime_column = "created_at"\n')
    project = CursorProject(root, dsn)
    project.execute(DUCKDB_EVENTS if dsn is None else POSTGRES_EVENTS)
    project.write_model(extra)
    for step in (("build",), ("deploy", MODEL)):
        result = project.tidegate(*step)
        assert result.exit_code == 0, result.stderr
    return project
