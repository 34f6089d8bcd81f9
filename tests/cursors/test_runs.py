"""A cursor model picks up exactly the rows past its committed cursor on each run, on DuckDB and
on PostgreSQL: the target holds every source row once, however the inserts and runs
interleave, and each run records how far it went and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cursors import cursor_kit
from tests.cursors.cursor_kit import MODEL, CursorProject, cursor_project


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def events(request: pytest.FixtureRequest, tmp_path: Path) -> CursorProject:
    dsn = request.getfixturevalue("dsn") if request.param == "postgres" else None
    return cursor_project(tmp_path / "proj", dsn)


def published(document: dict[str, object]) -> list[str]:
    outcomes = document["partitions"]
    assert isinstance(outcomes, list)
    return [o["partition"] for o in outcomes if o["state"] == "published"]


def test_each_run_picks_up_exactly_the_new_rows(events: CursorProject) -> None:
    events.insert(40)
    assert published(events.run()) == ["(0,40]"]
    events.insert(25)
    assert published(events.run()) == ["(40,65]"]
    assert published(events.run()) == []  # nothing new: nothing written
    events.insert(10)
    assert published(events.run()) == ["(65,75]"]
    assert events.target_ids() == events.source_ids() == list(range(1, 76))
    values = events.execute(f"SELECT sum(net) FROM {MODEL}")[0][0]
    assert values == 2 * events.execute("SELECT sum(amount) FROM events")[0][0]


def test_the_run_records_its_watermark_and_status_shows_the_cursor(
    events: CursorProject,
) -> None:
    events.insert(5)
    run = events.run()
    shown = events.tidegate("show", "run", run["run_id"], "--json").json()
    [mark] = shown["cursor"]
    assert mark["cursor"] == "events.id"
    assert (mark["committed"], mark["watermark"], mark["candidate"]) == ("0", "5", "5")
    assert mark["rule"] == ("max" if events.dsn is None else "snapshot")
    assert mark["reason"].startswith("max 5")
    text = events.tidegate("show", "run", run["run_id"]).stdout
    assert "cursor event_amounts (events.id): (0, 5] by watermark" in text
    status = events.tidegate("status", "--json").json()["models"][0]
    assert status["grain"] == "cursor"
    assert status["cursor"]["committed"] == "5"
    assert status["cursor"]["position"] == "after the committed cursor 5 (published by v1)"
    assert status["cursor"]["last_mark"]["run_id"] == run["run_id"]


@pytest.mark.duckdb
def test_batches_of_at_most_n_rows_each_publish_their_interval(tmp_path: Path) -> None:
    events = cursor_project(tmp_path / "proj", extra="cursor_batch_rows = 4\n")
    events.insert(10)
    assert published(events.run()) == ["(0,4]", "(4,8]", "(8,10]"]
    events.insert(3)
    assert published(events.run()) == ["(10,13]"]
    assert events.target_ids() == events.source_ids()
    # the report draws one cell per interval, not one per id
    report = events.tidegate("report", "--out", str(events.root / "report.html"), "--json")
    [model] = report.json()["models"]
    assert (model["grain"], model["partitions"]) == ("cursor", 4)
    assert model["counts"]["published"] == 4 and model["counts"]["missing"] == 0


@pytest.mark.duckdb
def test_a_failed_batch_stops_the_run_and_the_cursor_waits_there(tmp_path: Path) -> None:
    events = cursor_project(
        tmp_path / "proj",
        extra='cursor_batch_rows = 4\n\n[[checks]]\ntype = "expression"\nexpression = "net < 20"\n',
    )
    events.insert(12)  # net = 2.5 * id: ids 8.. fail the check
    result = events.tidegate("run", MODEL, "--json")
    assert result.exit_code == 1
    states = [(o["partition"], o["state"]) for o in result.json()["partitions"]]
    assert states == [("(0,4]", "published"), ("(4,8]", "failed")]  # none after the failure
    assert events.target_ids() == [1, 2, 3, 4]
    status = events.tidegate("status", "--json").json()["models"][0]
    assert status["cursor"]["committed"] == "4"


@pytest.mark.duckdb
def test_a_timestamp_cursor_with_a_lag_leaves_the_newest_rows_for_later(tmp_path: Path) -> None:
    events = cursor_project(tmp_path / "proj")
    events.write_model(
        sql=(
            '/* tidegate\ngrain = "cursor"\ncursor_column = "created_at"\n'
            'write_mode = "append"\ncursor_lag = "10s"\n\n[columns]\n'
            'created_at = "TIMESTAMP NOT NULL"\nid = "BIGINT NOT NULL"\n*/\n'
            "SELECT created_at, id FROM events "
            "WHERE created_at > $start AND created_at <= $end\n"
        )
    )
    assert events.tidegate("build").exit_code == 0
    deployed = events.tidegate("deploy", MODEL, "--force", "--reason", "new cursor", "--json")
    assert deployed.exit_code == 0, deployed.stderr
    events.insert(30)  # created_at 2026-01-01 00:00:01 .. 00:00:30
    run = events.tidegate("run", MODEL, "--json", "--as-of", "2026-06-01T00:00:00Z").json()
    assert [o["partition"] for o in run["partitions"]] == ["(1767225600999999,1767225620000000]"]
    assert events.target_ids() == list(range(1, 21))  # up to max - 10 s
    shown = events.tidegate("show", "run", run["run_id"], "--json").json()
    assert shown["cursor"][0]["watermark"] == "2026-01-01 00:00:20"
    assert shown["cursor"][0]["reason"] == "max 2026-01-01 00:00:30 minus lag 10s"


@pytest.mark.duckdb
def test_the_committed_cursor_is_the_furthest_interval_whatever_the_clock(tmp_path: Path) -> None:
    events = cursor_project(tmp_path / "proj")
    events.insert(10)
    future = events.tidegate("run", MODEL, "--json", "--as-of", "2030-01-01T00:00:00Z")
    assert future.exit_code == 0, future.stderr
    events.insert(10)
    events.run()
    events.insert(5)
    last = events.run()
    assert published(last) == ["(20,25]"]
    assert events.target_ids() == events.source_ids() == list(range(1, 26))


TIES_MODEL = """/* tidegate
grain = "cursor"
cursor_column = "created_at"
write_mode = "append"

[columns]
id = "BIGINT NOT NULL"
created_at = "TIMESTAMP NOT NULL"
*/
SELECT id, created_at FROM events WHERE created_at > $start AND created_at <= $end
"""


def test_a_row_arriving_later_with_the_newest_timestamp_is_not_skipped(
    events: CursorProject,
) -> None:
    events.write_model(sql=TIES_MODEL)
    assert events.tidegate("build").exit_code == 0
    deployed = events.tidegate("deploy", MODEL, "--force", "--reason", "created_at cursor")
    assert deployed.exit_code == 0, deployed.stderr

    def stamped(event_id: int, at: str) -> None:  # PostgreSQL draws the id itself
        if events.dsn is None:
            events.execute(f"INSERT INTO events VALUES ({event_id}, TIMESTAMP '{at}', 'k', 1)")
        else:
            events.execute(f"INSERT INTO events (created_at, kind, amount) VALUES ('{at}', 'k', 1)")

    stamped(1, "2026-01-01 10:00:00")
    stamped(2, "2026-01-01 10:00:05")
    run = events.run()
    mark = events.tidegate("show", "run", run["run_id"], "--json").json()["cursor"][0]
    assert mark["watermark"] == "2026-01-01 10:00:04.999999"  # the newest value waits
    stamped(3, "2026-01-01 10:00:05")  # the same value, committed after the run
    events.run()
    assert events.target_ids() == [1]  # 10:00:05 is still the newest value: both rows wait
    stamped(4, "2026-01-01 10:00:06")
    events.run()
    assert events.target_ids() == [1, 2, 3]


@pytest.mark.duckdb
@pytest.mark.parametrize(
    ("declared", "end"),
    [("cursor_unique = true\n", 5), ('unique_key = ["id"]\n', 5), ("", 4)],
)
def test_a_unique_cursor_goes_up_to_the_newest_value(
    tmp_path: Path, declared: str, end: int
) -> None:
    events = cursor_project(tmp_path / "proj")
    events.write_model(
        sql=cursor_kit.MODEL_SQL.replace("cursor_unique = true\n", "").format(extra=declared)
    )
    assert events.tidegate("build").exit_code == 0
    deployed = events.tidegate("deploy", MODEL, "--force", "--reason", "uniqueness declared")
    assert deployed.exit_code == 0, deployed.stderr
    events.insert(5)
    events.run()
    assert events.target_ids() == list(range(1, end + 1))


def test_a_cursor_column_the_source_keys_unique_goes_up_to_the_newest_value(
    events: CursorProject,
) -> None:
    events.write_model(
        sql=cursor_kit.MODEL_SQL.replace("cursor_unique = true\n", "").format(extra="")
    )
    assert events.tidegate("build").exit_code == 0
    deployed = events.tidegate("deploy", MODEL, "--force", "--reason", "uniqueness from the source")
    assert deployed.exit_code == 0, deployed.stderr
    if events.dsn is None:  # PostgreSQL's events.id is its primary key already
        events.execute("DROP TABLE events")
        events.execute(
            cursor_kit.DUCKDB_EVENTS.replace("id BIGINT NOT NULL", "id BIGINT PRIMARY KEY")
        )
    events.insert(5)
    run = events.run()
    assert events.target_ids() == [1, 2, 3, 4, 5]
    mark = events.tidegate("show", "run", run["run_id"], "--json").json()["cursor"][0]
    assert "not unique" not in mark["reason"]
