"""A new version of a cursor model continues from the committed cursor, or from the
cursor_start it declares (said by deploy); one that reads its cursor from another column
without declaring where to start, or that would append rows a second time, is refused in one
line, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cursors.cursor_kit import MODEL, MODEL_SQL, CursorProject, cursor_project
from tests.kit import state_dump

pytestmark = pytest.mark.duckdb

TIMESTAMP_MODEL = """/* tidegate
grain = "cursor"
cursor_column = "created_at"
write_mode = "append"
{extra}
[columns]
created_at = "TIMESTAMP NOT NULL"
id = "BIGINT NOT NULL"
kind = "VARCHAR NOT NULL"
net = "DECIMAL(18, 2) NOT NULL"
*/
SELECT created_at, id, kind, CAST(amount * 2 AS DECIMAL(18, 2)) AS net
FROM events
WHERE created_at > $start AND created_at <= $end
"""


@pytest.fixture
def events(tmp_path: Path) -> CursorProject:
    found = cursor_project(tmp_path / "proj")
    found.insert(10)
    found.run()
    return found


def build_and_validate(events: CursorProject, text: str) -> None:
    events.write_model(sql=text)
    assert events.tidegate("build").exit_code == 0
    gate = events.tidegate("validate", MODEL)
    assert gate.exit_code == 0, gate.stdout + gate.stderr


def test_a_new_version_continues_from_the_committed_cursor(events: CursorProject) -> None:
    build_and_validate(events, MODEL_SQL.format(extra="").replace("amount * 2", "amount * 3"))
    deployed = events.tidegate("deploy", MODEL, "--json")
    assert deployed.exit_code == 0, deployed.stderr
    assert deployed.json()["cursor"] == "after the committed cursor 10 (published by v1)"
    events.insert(5)
    run = events.run()
    assert [p["partition"] for p in run["partitions"]] == ["(10,15]"]
    assert events.target_ids() == events.source_ids() == list(range(1, 16))
    by_v2 = events.execute(
        f"SELECT t.id FROM {MODEL} AS t JOIN events AS e USING (id) "
        "WHERE t.net = e.amount * 3 ORDER BY 1"
    )
    assert [r[0] for r in by_v2] == list(range(11, 16))  # v2 wrote the new rows only


def test_a_version_declaring_cursor_start_restarts_there(events: CursorProject) -> None:
    events.insert(20)  # 11..30
    build_and_validate(events, MODEL_SQL.format(extra="cursor_start = 25\n"))
    deployed = events.tidegate("deploy", MODEL)
    assert deployed.exit_code == 0, deployed.stderr
    assert "the next run uses it, after cursor_start 25 (declared by v2)" in deployed.stdout
    run = events.run()
    assert [p["partition"] for p in run["partitions"]] == ["(25,30]"]
    assert events.target_ids() == [*range(1, 11), *range(26, 31)]
    events.insert(2)
    events.run()  # from then on v2 continues from what it published
    assert events.target_ids() == [*range(1, 11), *range(26, 33)]


def test_a_restart_below_the_committed_cursor_with_a_unique_key_adds_nothing_twice(
    events: CursorProject,
) -> None:
    build_and_validate(events, MODEL_SQL.format(extra='cursor_start = 5\nunique_key = ["id"]\n'))
    assert events.tidegate("deploy", MODEL).exit_code == 0
    events.insert(3)
    run = events.run()
    assert [p["partition"] for p in run["partitions"]] == ["(5,13]"]
    assert events.target_ids() == events.source_ids() == list(range(1, 14))


def test_a_restart_that_would_append_rows_twice_is_refused(events: CursorProject) -> None:
    build_and_validate(events, MODEL_SQL.format(extra="cursor_start = 5\n"))
    before = state_dump(events.root)
    refused = events.tidegate("deploy", MODEL)
    assert refused.exit_code == 3
    assert refused.stderr.strip().splitlines() == [
        "error: event_amounts v2: cursor_start 5 is below the committed cursor 10, and append "
        "without a unique key would add those rows again; declare a unique_key or a "
        "cursor_start at or above it"
    ]
    assert state_dump(events.root) == before


def test_a_changed_cursor_column_needs_a_cursor_start(events: CursorProject) -> None:
    events.write_model(sql=TIMESTAMP_MODEL.format(extra=""))
    assert events.tidegate("build").exit_code == 0
    before = state_dump(events.root)
    refused = events.tidegate("deploy", MODEL, "--force", "--reason", "no gate for a new column")
    assert refused.exit_code == 3
    assert refused.stderr.strip().splitlines() == [
        "error: event_amounts v2 reads its cursor from events.created_at, but the committed "
        "cursor was measured in events.id (v1); declare cursor_start in the new version"
    ]
    assert state_dump(events.root) == before
    assert events.tidegate("run", MODEL).exit_code == 0  # v1 still runs

    events.write_model(sql=TIMESTAMP_MODEL.format(extra='cursor_start = "2026-01-01 00:00:10"\n'))
    assert events.tidegate("build").exit_code == 0
    deployed = events.tidegate("deploy", MODEL, "--force", "--reason", "new cursor column")
    assert deployed.exit_code == 0, deployed.stderr
    assert "after cursor_start 2026-01-01 00:00:10 (declared by v3)" in deployed.stdout
    events.insert(5)  # created_at 00:00:11 .. 00:00:15
    assert events.tidegate("run", MODEL).exit_code == 0
    # created_at is not unique: the newest value (id 15) waits for the next run
    assert events.target_ids() == list(range(1, 15))


def test_a_rollback_past_a_version_with_another_cursor_column_is_refused(
    events: CursorProject,
) -> None:
    # v1 (cursor on id) published up to 10; v2 reads created_at from its cursor_start
    events.write_model(sql=TIMESTAMP_MODEL.format(extra='cursor_start = "2026-01-01 00:00:10"\n'))
    assert events.tidegate("build").exit_code == 0
    deployed = events.tidegate("deploy", MODEL, "--force", "--reason", "created_at cursor")
    assert deployed.exit_code == 0, deployed.stderr
    events.insert(5)
    assert events.tidegate("run", MODEL).exit_code == 0
    assert events.target_ids() == list(range(1, 15))  # the newest created_at waits
    before = state_dump(events.root)
    back = events.tidegate("rollback", MODEL, "--reason", "back to id")
    assert back.exit_code == 3, back.stdout + back.stderr
    assert "is stale: v2 published from events.created_at after it" in back.stderr
    assert state_dump(events.root) == before
    events.insert(2)
    assert events.tidegate("run", MODEL).exit_code == 0  # v2 still runs, from its own cursor
    assert events.target_ids() == list(range(1, 17))


def test_a_rollback_after_a_restart_below_the_cursor_continues_past_everything_published(
    events: CursorProject,
) -> None:
    # v1 (append, no unique key) published up to 10; v2 restarts at 5 with a unique key and a
    # lag, and stops at 7
    extra = 'cursor_start = 5\nunique_key = ["id"]\ncursor_lag = 8\n'
    build_and_validate(events, MODEL_SQL.format(extra=extra))
    assert events.tidegate("deploy", MODEL).exit_code == 0
    events.insert(5)
    run = events.run()
    assert [p["partition"] for p in run["partitions"]] == ["(5,7]"]
    back = events.tidegate("rollback", MODEL, "--reason", "back to v1")
    assert back.exit_code == 0, back.stderr
    assert "after the committed cursor 10 (published by v1)" in back.stdout
    run = events.run()
    assert [p["partition"] for p in run["partitions"]] == ["(10,15]"]
    assert events.target_ids() == events.source_ids() == list(range(1, 16))
