"""A bad cursor declaration, or an operation a cursor model does not support, is one line on
stderr naming what is wrong (file, line and key for a declaration), exit 2, and writes
nothing: not the ledger, not the warehouse."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cursors.cursor_kit import MODEL, CursorProject, cursor_project
from tests.kit import state_dump, warehouse_dump

pytestmark = pytest.mark.duckdb

HEADER = '/* tidegate\ngrain = "cursor"\n{keys}\n[columns]\n{columns}\n*/\n'
COLUMNS = 'id = "BIGINT NOT NULL"\nkind = "VARCHAR NOT NULL"'
SELECT = "SELECT id, kind FROM events WHERE id > $start AND id <= $end\n"

# (header keys, columns, SQL) → the line expected on stderr after "error: "
DECLARATIONS = {
    "no cursor column": (
        'write_mode = "append"',
        COLUMNS,
        SELECT,
        "models/event_amounts.sql:2: grain: a cursor grain needs cursor_column (the source "
        "column the cursor measures)",
    ),
    "cursor column not carried": (
        'cursor_column = "id"\nwrite_mode = "append"',
        'kind = "VARCHAR NOT NULL"',
        "SELECT kind FROM events WHERE id > $start AND id <= $end\n",
        "models/event_amounts.sql:3: cursor_column: 'id' is not in columns",
    ),
    "cursor column of another type": (
        'cursor_column = "kind"\nwrite_mode = "append"',
        COLUMNS,
        SELECT,
        "models/event_amounts.sql:3: cursor_column: 'kind' must be an integer or a TIMESTAMP, "
        "NOT NULL (it is TEXT NOT NULL)",
    ),
    "overwrite": (
        'cursor_column = "id"',
        COLUMNS,
        SELECT,
        "models/event_amounts.sql:2: write_mode: a cursor model appends what is past its cursor "
        '(write_mode = "append"), not overwrite',
    ),
    "start that is no id": (
        'cursor_column = "id"\nwrite_mode = "append"\ncursor_start = "ten"',
        COLUMNS,
        SELECT,
        "models/event_amounts.sql:5: cursor_start: 'ten' is not an integer",
    ),
    "lag that is no count": (
        'cursor_column = "id"\nwrite_mode = "append"\ncursor_lag = "5m"',
        COLUMNS,
        SELECT,
        "models/event_amounts.sql:5: cursor_lag: '5m' is not a count of ids (an integer, 0 or "
        "more)",
    ),
    "empty batches": (
        'cursor_column = "id"\nwrite_mode = "append"\ncursor_batch_rows = 0',
        COLUMNS,
        SELECT,
        "models/event_amounts.sql:5: cursor_batch_rows: Input should be greater than 0",
    ),
    "a time column": (
        'cursor_column = "id"\nwrite_mode = "append"\ntime_column = "id"',
        COLUMNS,
        SELECT,
        "models/event_amounts.sql:5: time_column: not for a cursor model (it runs past its "
        "cursor on every `tidegate run`; see cursor_column)",
    ),
    "a key parameter": (
        'cursor_column = "id"\nwrite_mode = "append"',
        COLUMNS,
        "SELECT id, kind FROM events WHERE kind = $key\n",
        "models/event_amounts.sql:9: $key is an unavailable parameter here (use $end, $start)",
    ),
    "a source it does not read": (
        'cursor_column = "id"\nwrite_mode = "append"\ncursor_source = "orders"',
        COLUMNS,
        SELECT,
        "models/event_amounts.sql:5: cursor_source: 'orders' is not a source the model reads "
        "(events)",
    ),
}


@pytest.fixture
def events(tmp_path: Path) -> CursorProject:
    found = cursor_project(tmp_path / "proj")
    found.insert(3)
    run = found.run()
    (found.root / "first-run").write_text(run["run_id"])
    return found


def one_line(result: object) -> str:
    stderr = getattr(result, "stderr", "")
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return str(lines[0])


@pytest.mark.parametrize("case", list(DECLARATIONS))
def test_a_bad_declaration_is_one_line_with_file_line_and_key(
    events: CursorProject, case: str
) -> None:
    keys, columns, select, expected = DECLARATIONS[case]
    events.write_model(sql=HEADER.format(keys=keys, columns=columns) + select)
    before = state_dump(events.root), warehouse_dump(events.root)
    result = events.tidegate("build")
    assert result.exit_code == 2
    assert one_line(result) == f"error: {expected}"
    assert (state_dump(events.root), warehouse_dump(events.root)) == before


def test_cursor_keys_on_a_time_grain_are_refused(events: CursorProject) -> None:
    events.write_model(
        sql='/* tidegate\ngrain = "day"\ntime_column = "day"\ncursor_column = "day"\n\n'
        '[columns]\nday = "DATE NOT NULL"\n*/\n'
        "SELECT CAST(created_at AS DATE) AS day FROM events "
        "WHERE created_at >= $start AND created_at < $end\n"
    )
    result = events.tidegate("build")
    assert result.exit_code == 2
    assert one_line(result) == (
        'error: models/event_amounts.sql:4: cursor_column: only for grain = "cursor"'
    )


def test_a_model_reading_a_cursor_model_is_refused(events: CursorProject) -> None:
    (events.root / "models" / "kinds.sql").write_text(
        '/* tidegate\ngrain = "key"\nkey_column = "kind"\nkeys = ["k0"]\n\n[columns]\n'
        'kind = "VARCHAR NOT NULL"\n*/\nSELECT DISTINCT kind FROM event_amounts '
        "WHERE kind = $key\n"
    )
    result = events.tidegate("build")
    assert result.exit_code == 2
    assert one_line(result) == (
        "error: models/kinds.sql:9: reads the cursor model 'event_amounts': reading a cursor "
        "model is not supported yet"
    )


@pytest.mark.parametrize(
    "command",
    [
        ("run", MODEL, "--partition", "(0,3]"),
        ("rerun", "FIRST-RUN", "--partitions", "(0,3]", "--dry-run"),
        ("taint", MODEL, "--partitions", "(0,3]", "--reason", "bad rows"),
    ],
)
def test_ranges_of_a_cursor_model_are_refused(
    events: CursorProject, command: tuple[str, ...]
) -> None:
    first_run = (events.root / "first-run").read_text()
    before = state_dump(events.root), warehouse_dump(events.root)
    result = events.tidegate(*[first_run if a == "FIRST-RUN" else a for a in command])
    assert result.exit_code == 2, result.stdout + result.stderr
    assert one_line(result) == (
        "error: a cursor model's partitions are the intervals its runs processed: `tidegate run "
        "MODEL` (or `backfill MODEL --partitions all`) continues past its committed cursor; "
        "ranges of a cursor model cannot be rerun, tainted or compared yet"
    )
    assert (state_dump(events.root), warehouse_dump(events.root)) == before


def test_show_partition_takes_the_interval_as_it_is_labelled(events: CursorProject) -> None:
    shown = events.tidegate("show", "partition", MODEL, "(0,3]", "--json")
    assert shown.exit_code == 0, shown.stderr
    assert shown.json()["state"] == "published"
    wrong = events.tidegate("show", "partition", MODEL, "0..3")
    assert wrong.exit_code == 2
    assert one_line(wrong) == (
        "error: partition '0..3' is not a cursor partition (expected (START,END], e.g. (100,250])"
    )
