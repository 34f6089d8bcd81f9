"""Deploy preflight: a version that could not run is refused before it becomes active."""

from __future__ import annotations

from pathlib import Path

from tests.kit import FORCED, state_dump, tidegate, warehouse_execute


def new_model(project: Path, select: str, columns: str = 'd = "DATE NOT NULL"\n') -> None:
    (project / "models" / "notes.sql").write_text(
        '/* tidegate\ngrain = "day"\ntime_column = "d"\nstart = "2025-01-01"\n\n'
        f"[columns]\n{columns}*/\n{select}\nWHERE order_ts >= $start AND order_ts < $end\n"
    )
    built = tidegate("build", "--project", project)
    assert built.exit_code == 0, built.stderr


def refused(project: Path, *extra: str) -> str:
    before = state_dump(project)
    result = tidegate("deploy", "notes", *extra, "--project", project)
    assert result.exit_code == 3, (result.stdout, result.stderr)
    assert state_dump(project) == before
    [line] = result.stderr.strip().splitlines()
    return line


def test_a_query_reading_a_missing_column_is_refused(project: Path) -> None:
    new_model(project, "SELECT CAST(order_tss AS DATE) AS d FROM orders")
    line = refused(project)
    assert "notes v1 failed its preflight" in line and "order_tss" in line


def test_output_that_breaks_the_contract_is_refused(project: Path) -> None:
    new_model(project, "SELECT CAST(order_ts AS DATE) AS d, status FROM orders")
    assert "column status is not in the contract" in refused(project)
    new_model(
        project,
        "SELECT CAST(order_ts AS DATE) AS d, customer_id AS c FROM orders",
        'd = "DATE NOT NULL"\nc = "VARCHAR"\n',
    )
    assert "column c is BIGINT, contract says TEXT" in refused(project)


def test_a_missing_source_table_is_refused(project: Path) -> None:
    config = project / "tidegate.toml"
    config.write_text(config.read_text().replace('table = "orders"', 'table = "orders_v2"'))
    new_model(project, "SELECT CAST(order_ts AS DATE) AS d FROM orders")
    assert "source orders: table orders_v2 does not exist" in refused(project)


def test_a_forced_deploy_keeps_what_the_preflight_found(project: Path) -> None:
    new_model(project, "SELECT CAST(order_ts AS DATE) AS d, status FROM orders")
    forced = tidegate("deploy", "notes", *FORCED, "--json", "--project", project)
    assert forced.exit_code == 0, forced.stderr
    assert forced.json()["forced"] is True
    history = tidegate("history", "notes", "--json", "--project", project).json()
    [deploy] = [e for e in history["events"] if e["kind"] == "deploy"]
    assert deploy["detail"]["preflight"] == ["column status is not in the contract"]


def test_a_sound_first_version_passes_its_preflight(project: Path) -> None:
    new_model(project, "SELECT CAST(order_ts AS DATE) AS d FROM orders")
    deployed = tidegate("deploy", "notes", "--json", "--project", project)
    assert deployed.exit_code == 0, deployed.stderr
    history = tidegate("history", "notes", "--json", "--project", project).json()
    assert [e["detail"]["preflight"] for e in history["events"] if e["kind"] == "deploy"] == [[]]


def test_a_published_column_the_version_would_retype_is_refused_until_the_table_is(
    project: Path,
) -> None:
    """A column published as BIGINT that the next version declares DOUBLE: the deploy's
    preflight finds it (forced here) and the backfill is refused up front — its INSERT would
    cast the new values into the old type, and the checksums would describe rows the table
    does not hold — until the table's column is retyped."""
    days = ("--partitions", "2025-01-01..2025-01-02", "--project", project)
    new_model(
        project,
        "SELECT CAST(order_ts AS DATE) AS d, order_id AS n FROM orders",
        'd = "DATE NOT NULL"\nn = "BIGINT"\n',
    )
    assert tidegate("deploy", "notes", "--project", project).exit_code == 0
    assert tidegate("backfill", "notes", *days).exit_code == 0
    new_model(
        project,
        "SELECT CAST(order_ts AS DATE) AS d, CAST(order_id AS DOUBLE) AS n FROM orders",
        'd = "DATE NOT NULL"\nn = "DOUBLE"\n',
    )
    forced = tidegate("deploy", "notes", *FORCED, "--json", "--project", project)
    assert forced.exit_code == 0, forced.stderr
    retyped = "published column n is BIGINT; v2 writes DOUBLE"
    history = tidegate("history", "notes", "--json", "--project", project).json()
    assert [e["detail"]["preflight"] for e in history["events"] if e["kind"] == "deploy"][-1] == [
        retyped
    ]
    before = state_dump(project)
    result = tidegate("backfill", "notes", *days)
    assert result.exit_code == 3, result
    [line] = result.stderr.splitlines()
    assert (
        f"notes v2 cannot run against the warehouse as it is now, nothing started: {retyped}"
        in line
    )
    assert state_dump(project) == before
    warehouse_execute(project, "ALTER TABLE notes ALTER n TYPE DOUBLE")
    assert tidegate("backfill", "notes", *days).exit_code == 0
