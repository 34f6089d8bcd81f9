"""One writer process of tests/iceberg/test_concurrent.py: publishes one day of the `sales`
table through IcebergTables into the SQLite catalog of a folder, and prints its outcome as the
last line of stdout (a JSON document).

    python -m tests.iceberg.concurrent_writer FOLDER DAY AMOUNT ATTEMPT [--hold]

With --hold, the audit of its branch prints "audit" and waits for a line on stdin before it
returns: the test lets another writer commit meanwhile, deterministically.
"""

from __future__ import annotations

import json
import sys
from datetime import date, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from tests.iceberg.kit import sqlite_place
from tidegate.domain.errors import EngineError
from tidegate.engines.base import CommitMarker
from tidegate.engines.iceberg_tables import IcebergTables

NAMESPACE = "analytics"
TABLE = "sales"
COLUMN = "day"
ROWS_PER_PUBLISH = 3
ARROW_SCHEMA = pa.schema([pa.field("day", pa.date32(), nullable=False), ("amount", pa.int64())])


def rows_of(day: date, amount: int) -> pa.Table:
    """The rows one writer publishes for a day: ROWS_PER_PUBLISH rows, each of `amount`."""
    return pa.Table.from_pydict(
        {"day": [day] * ROWS_PER_PUBLISH, "amount": [amount] * ROWS_PER_PUBLISH},
        schema=ARROW_SCHEMA,
    )


def bounds_of(day: date) -> dict[str, datetime]:
    start = datetime(day.year, day.month, day.day)
    return {"start": start, "end": start + timedelta(days=1)}


def marker_of(day: date, attempt: str) -> CommitMarker:
    start = int((datetime(day.year, day.month, day.day) - datetime(1970, 1, 1)).total_seconds())
    return CommitMarker(
        attempt_id=attempt,
        model=TABLE,
        grain="day",
        partition_start=start,
        partition_end=start + 86400,
        run_id=f"run-{attempt}",
        version_id="v1",
        checksum=f"{ROWS_PER_PUBLISH}:0000000000000000",
        published_at="2025-01-01T00:00:00+00:00",
    )


def create_table(folder: Path) -> None:
    """The `sales` table, partitioned by day, with its empty first snapshot on main."""
    tables = IcebergTables(sqlite_place(folder, NAMESPACE))
    try:
        tables.create(TABLE, None, ARROW_SCHEMA, ["day"], COLUMN, "day", {})
    finally:
        tables.close()


def publish(folder: Path, day: date, amount: int, attempt: str, hold: bool) -> dict[str, object]:
    tables = IcebergTables(sqlite_place(folder, NAMESPACE))

    def audit(files: list[str]) -> None:
        if not files:
            raise EngineError("the branch holds no file of the window")
        if hold:
            print("audit", flush=True)
            sys.stdin.readline()

    try:
        table = tables.load(TABLE, fresh=True)
        assert table is not None, "the test creates the table first"
        published = tables.publish(
            table, rows_of(day, amount), COLUMN, bounds_of(day), [marker_of(day, attempt)], audit
        )
        return {"published": published.snapshot_id, "moved": published.moved}
    except EngineError as error:
        return {"error": str(error)}
    finally:
        tables.close()


def main(argv: list[str]) -> int:
    folder, day, amount, attempt = argv[:4]
    outcome = publish(
        Path(folder), date.fromisoformat(day), int(amount), attempt, "--hold" in argv[4:]
    )
    print(json.dumps(outcome), flush=True)
    return 0 if "published" in outcome else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
