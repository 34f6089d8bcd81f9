"""A cursor model reconciles each interval with the rows of its cursor source in that interval:
the results are recorded with the attempt and shown, and a mismatch keeps the interval (and the
cursor) from moving, on DuckDB and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cursors.cursor_kit import MODEL, CursorProject, cursor_project
from tests.kit import tidegate

RECONCILED = """
[[reconciliations]]
name = "events"
source = "events"
source_expression = "count(*)"
target_expression = "count(*)"

[[reconciliations]]
name = "net"
source = "events"
source_expression = "sum(amount) * 2"
target_expression = "{target}"
"""


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest) -> str | None:
    return request.getfixturevalue("dsn") if request.param == "postgres" else None


def reconciliations(events: CursorProject, run: dict[str, Any]) -> list[dict[str, Any]]:
    shown = events.tidegate("show", "run", run["run_id"], "--json").json()
    [attempt] = [a for a in shown["attempts"] if a["model"] == MODEL]
    return list(attempt["reconciliations"])


def test_each_interval_is_reconciled_with_its_source_rows(
    engine: str | None, tmp_path: Path
) -> None:
    events = cursor_project(tmp_path / "proj", engine, RECONCILED.format(target="sum(net)"))
    events.insert(8)
    first = events.run()
    events.insert(4)
    second = events.run()
    for run, rows in ((first, 8), (second, 4)):
        found = {r["name"]: r for r in reconciliations(events, run)}
        assert set(found) == {"events", "net"}
        assert all(r["passed"] for r in found.values()), found
        assert int(found["events"]["source_value"]) == rows
        assert found["net"]["source_value"] is not None
    # the second interval's sum is of its own rows only: ids 9..12, amounts 1.25 .. 5.00
    net = {r["name"]: r for r in reconciliations(events, second)}["net"]
    assert float(net["source_value"]) == pytest.approx(2 * 1.25 * (1 + 2 + 3 + 4))


def test_a_mismatch_keeps_the_interval_and_the_cursor_where_they_are(
    engine: str | None, tmp_path: Path
) -> None:
    events = cursor_project(tmp_path / "proj", engine, RECONCILED.format(target="sum(net) + 1"))
    events.insert(5)
    result = events.tidegate("run", MODEL, "--json")
    assert result.exit_code == 1, result.stdout
    [outcome] = result.json()["partitions"]
    assert outcome["state"] == "failed"
    assert outcome["reason"].startswith("reconciliation net: source "), outcome
    assert outcome["reason"].endswith("(MISMATCH)"), outcome
    assert result.json()["published"] == 0
    status = events.tidegate("status", "--json").json()["models"][0]
    assert status["cursor"]["committed"] is None


def test_a_cursor_model_reconciles_only_with_its_cursor_source(tmp_path: Path) -> None:
    events = cursor_project(tmp_path / "proj")
    config = events.root / "tidegate.toml"
    config.write_text(config.read_text() + '\n[sources.kinds]\ntime_column = "created_at"\n')
    events.execute("CREATE TABLE kinds (kind VARCHAR, created_at TIMESTAMP)")
    sql = (events.root / "models" / f"{MODEL}.sql").read_text()
    declared = RECONCILED.format(target="sum(net)").replace('source = "events"', 'source = "kinds"')
    header, _, body = sql.partition("*/")
    body = body.replace("FROM events", "FROM events JOIN kinds USING (kind)")
    (events.root / "models" / f"{MODEL}.sql").write_text(
        header.replace(
            'cursor_column = "id"', 'cursor_column = "id"\ncursor_source = "events"'
        ).replace("[columns]", declared.strip() + "\n\n[columns]")
        + "*/"
        + body
    )
    built = tidegate("build", "--project", events.root)
    assert built.exit_code == 2, built.stdout
    [line] = built.stderr.splitlines()
    assert "reconciles each interval with its cursor source 'events', not 'kinds'" in line
