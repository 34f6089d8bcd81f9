"""A hostile key in a key-list model is data, never SQL (docs/design.md §7: partition values never
reach SQL by string concatenation of user input)."""

from __future__ import annotations

from pathlib import Path

from tests.kit import assert_no_staging, state_dump, tidegate, warehouse_dump, warehouse_rows

HOSTILE = "x'); DROP TABLE orders; --"
KEYS = '["eu", "us", "x\'); DROP TABLE orders; --"]'


def key_model(body: str) -> str:
    return (
        "/* tidegate\n"
        'grain = "key"\n'
        'key_column = "region"\n'
        f"keys = {KEYS}\n"
        "\n[columns]\n"
        'region = "VARCHAR NOT NULL"\n'
        'order_count = "BIGINT NOT NULL"\n'
        "*/\n" + body
    )


def orders_snapshot(project: Path) -> list[tuple[object, ...]]:
    return warehouse_rows(
        project, "SELECT count(*), sum(order_id), sum(gross_amount), min(order_ts) FROM orders"
    )


def build_and_deploy(project: Path, model: str, validate_on: str | None = None) -> None:
    built = tidegate("build", "--project", project, "--json")
    assert built.exit_code == 0, built.stderr
    assert model in {m["model"] for m in built.json()["models"]}
    if validate_on is not None:
        gate = tidegate("validate", model, "--partitions", validate_on, "--project", project)
        assert gate.exit_code == 0, gate.stderr
    deployed = tidegate("deploy", model, "--project", project)
    assert deployed.exit_code == 0, deployed.stderr


def test_a_hostile_key_reading_a_source_is_published_as_data(undeployed_project: Path) -> None:
    project = undeployed_project
    (project / "models" / "by_region.sql").write_text(
        key_model(
            "SELECT CAST($key AS VARCHAR) AS region, count(*) AS order_count\n"
            "FROM orders\nWHERE $key = $key\n"
        )
    )
    before = orders_snapshot(project)
    assert before[0][0] == 365 * 20
    build_and_deploy(project, "by_region")

    result = tidegate("run", "by_region", "--partition", HOSTILE, "--project", project, "--json")

    # whatever happened, orders is intact
    assert orders_snapshot(project) == before
    assert result.exit_code == 0, result.stderr
    (partition,) = result.json()["partitions"]
    assert (partition["partition"], partition["state"]) == (HOSTILE, "published")
    assert warehouse_rows(project, "SELECT region, order_count FROM by_region") == [
        (HOSTILE, 365 * 20)
    ]
    shown = tidegate("show", "partition", "by_region", HOSTILE, "--project", project, "--json")
    assert shown.exit_code == 0, shown.stderr
    assert shown.json()["state"] == "published"
    assert_no_staging(project)


def test_hostile_keys_are_published_and_replaced_as_data(undeployed_project: Path) -> None:
    project = undeployed_project
    (project / "models" / "by_region.sql").write_text(
        key_model(
            "SELECT CAST($key AS VARCHAR) AS region, CAST(length($key) AS BIGINT) AS order_count\n"
        )
    )
    before = orders_snapshot(project)
    build_and_deploy(project, "by_region")

    every = tidegate("run", "by_region", "--partition", "all", "--project", project, "--json")
    assert every.exit_code == 0, every.stderr
    assert [p["state"] for p in every.json()["partitions"]] == ["published"] * 3
    again = tidegate("run", "by_region", "--partition", HOSTILE, "--project", project, "--json")
    assert again.exit_code == 0, again.stderr

    assert orders_snapshot(project) == before
    rows = warehouse_rows(project, "SELECT region, order_count FROM by_region ORDER BY region")
    # the rerun replaced exactly the hostile key's row: nothing duplicated, nothing lost
    assert rows == sorted([("eu", 2), ("us", 2), (HOSTILE, len(HOSTILE))])
    markers = warehouse_rows(
        project,
        "SELECT partition_start, count(*) FROM _tidegate.commit_markers "
        "WHERE model = 'by_region' GROUP BY ALL ORDER BY 1",
    )
    assert markers == [(0, 1), (1, 1), (2, 2)]
    shown = tidegate("show", "partition", "by_region", HOSTILE, "--project", project, "--json")
    assert shown.json()["partition"] == HOSTILE
    assert shown.json()["published"]["run_id"] == again.json()["run_id"]
    assert_no_staging(project)


def test_a_hostile_accepted_value_is_a_literal(project: Path) -> None:
    path = project / "models" / "daily_revenue.sql"
    text = path.read_text()
    widened = text.replace(
        'values = ["completed", "shipped", "cancelled", "refunded"]',
        'values = ["completed", "shipped", "cancelled", "refunded", "x\'); DROP TABLE orders; --"]',
    )
    assert widened != text
    path.write_text(widened)
    before = orders_snapshot(project)
    build_and_deploy(project, "daily_revenue", validate_on="2025-01-01")
    result = tidegate("run", "daily_revenue", "--partition", "2025-01-01", "--project", project)
    assert result.exit_code == 0, result.stderr
    assert orders_snapshot(project) == before
    statuses = warehouse_rows(
        project, "SELECT count(DISTINCT status) FROM orders WHERE order_ts < DATE '2025-01-02'"
    )
    assert warehouse_rows(project, "SELECT count(*) FROM daily_revenue") == statuses


def test_an_unknown_key_is_refused_and_writes_nothing(undeployed_project: Path) -> None:
    project = undeployed_project
    (project / "models" / "by_region.sql").write_text(
        key_model("SELECT CAST($key AS VARCHAR) AS region, CAST(1 AS BIGINT) AS order_count\n")
    )
    build_and_deploy(project, "by_region")
    ledger, warehouse = state_dump(project), warehouse_dump(project)
    unknown = tidegate(
        "run", "by_region", "--partition", "'; DELETE FROM orders; --", "--project", project
    )
    assert unknown.exit_code == 2
    assert "unknown partition key" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1
    assert state_dump(project) == ledger
    assert warehouse_dump(project) == warehouse
