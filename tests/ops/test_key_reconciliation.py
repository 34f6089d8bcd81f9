"""A key-list model reconciles each key with the rows of a source that hold it (the source names
its `key_column`), on DuckDB and PostgreSQL: results recorded per partition, a mismatch keeps the
key unpublished, and each key gets its own input fingerprint. Expected values come from the
warehouse directly, never from tidegate."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.engines.postgres_kit import fresh_database, postgres_project, rows
from tests.kit import example_project, tidegate, warehouse_rows
from tests.ops.test_backfill import show_partition

MODEL = "by_status"
KEYED_MODEL = """/* tidegate
grain = "key"
key_column = "status"
keys = ["completed", "cancelled", "lost"]

[columns]
status = "VARCHAR NOT NULL"
order_count = "BIGINT NOT NULL"
gross = "DECIMAL(18, 2) NOT NULL"

[[reconciliations]]
name = "orders"
source = "orders"
source_expression = "count(*)"
target_expression = "{target}"

[[reconciliations]]
name = "gross"
source = "orders"
source_expression = "sum(gross_amount)"
target_expression = "sum(gross)"
*/
SELECT status, count(*) AS order_count, CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross
FROM orders WHERE status = $key GROUP BY status
"""
KEYED_SOURCE = 'time_column = "order_ts"\nkey_column = "status"\n'

Query = Callable[[str], list[tuple[Any, ...]]]


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def keyed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Query]]:
    """The orders example whose orders source names its key column, and a query on its
    warehouse."""
    if request.param == "postgres":
        with fresh_database("keyrec") as dsn:
            project = postgres_project(tmp_path / "proj", dsn, deploy=False)
            yield _keyed(project), lambda sql: rows(dsn, sql)
        return
    project = example_project(tmp_path / "proj", deploy=False)
    yield _keyed(project), lambda sql: warehouse_rows(project, sql)


def _keyed(project: Path) -> Path:
    config = project / "tidegate.toml"
    text = config.read_text()
    assert 'time_column = "order_ts"\n' in text
    config.write_text(text.replace('time_column = "order_ts"\n', KEYED_SOURCE))
    return project


def deploy(project: Path, target: str = "sum(order_count)") -> None:
    (project / "models" / f"{MODEL}.sql").write_text(KEYED_MODEL.replace("{target}", target))
    for args in (("build",), ("deploy", MODEL)):
        done = tidegate(*args, "--project", project)
        assert done.exit_code == 0, (args, done.stdout, done.stderr)


def assert_nothing_published(query: Query) -> None:
    # a first publish creates the model's table in its transaction
    tables = f"SELECT count(*) FROM information_schema.tables WHERE table_name = '{MODEL}'"
    assert query(tables) == [(0,)]


def run_key(project: Path, key: str) -> Any:
    return tidegate("run", MODEL, "--partition", key, "--json", "--project", project)


def reconciliations(project: Path, key: str) -> dict[str, dict[str, Any]]:
    shown = show_partition(project, MODEL, key)["published"]
    return {r["name"]: r for r in shown["reconciliations"]}


def source_fingerprint(project: Path, key: str) -> str:
    inputs = show_partition(project, MODEL, key)["published"]["inputs"]
    [found] = [i for i in inputs if i["upstream"] == "orders"]
    assert found["range"] == f"status = {key}"
    return str(found["fingerprint"])


def test_each_key_is_reconciled_with_the_source_rows_holding_it(
    keyed: tuple[Path, Query],
) -> None:
    project, query = keyed
    deploy(project)
    for key in ("completed", "cancelled"):
        ran = run_key(project, key)
        assert ran.exit_code == 0, (ran.stdout, ran.stderr)
        [(count, gross)] = query(
            f"SELECT count(*), sum(gross_amount) FROM orders WHERE status = '{key}'"
        )
        found = reconciliations(project, key)
        assert set(found) == {"orders", "gross"}
        assert all(r["passed"] for r in found.values()), found
        assert int(found["orders"]["source_value"]) == count
        assert float(found["gross"]["source_value"]) == pytest.approx(float(gross))
    # the two keys read different rows: neither is the whole source
    [(everything,)] = query("SELECT count(*) FROM orders")
    counted = [
        int(reconciliations(project, k)["orders"]["source_value"])
        for k in ("completed", "cancelled")
    ]
    assert sum(counted) < everything


def test_a_mismatch_keeps_the_key_unpublished(keyed: tuple[Path, Query]) -> None:
    project, query = keyed
    deploy(project, target="sum(order_count) + 1")
    ran = run_key(project, "completed")
    assert ran.exit_code == 1, ran.stdout
    [outcome] = ran.json()["partitions"]
    assert outcome["state"] == "failed"
    assert outcome["reason"].startswith("reconciliation orders: source "), outcome
    assert outcome["reason"].endswith("(MISMATCH)"), outcome
    assert_nothing_published(query)


def test_a_key_without_source_rows_is_skipped_not_published_empty(
    keyed: tuple[Path, Query],
) -> None:
    project, query = keyed
    deploy(project)
    ran = run_key(project, "lost")
    assert ran.exit_code == 1, ran.stdout
    assert ran.json()["published"] == 0
    [outcome] = ran.json()["partitions"]
    assert outcome["state"] == "skipped"
    assert outcome["reason"] == (
        "source orders has 0 row(s) holding key lost (at least 1 expected)"
    ), outcome
    assert_nothing_published(query)


def test_a_change_to_one_keys_rows_changes_that_keys_inputs_only(tmp_path: Path) -> None:
    project = _keyed(example_project(tmp_path / "proj", deploy=False))
    deploy(project)
    for key in ("completed", "cancelled"):
        assert run_key(project, key).exit_code == 0
    before = {k: source_fingerprint(project, k) for k in ("completed", "cancelled")}
    [(changed,)] = warehouse_rows(
        project, "SELECT min(order_id) FROM orders WHERE status = 'cancelled'"
    )

    con = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        con.execute(
            "UPDATE orders SET gross_amount = gross_amount + 1 WHERE order_id = ?", [changed]
        )
    finally:
        con.close()
    for key in ("completed", "cancelled"):
        assert run_key(project, key).exit_code == 0
    after = {k: source_fingerprint(project, k) for k in ("completed", "cancelled")}
    assert after["completed"] == before["completed"]
    assert after["cancelled"] != before["cancelled"]


@pytest.mark.parametrize(
    ("source_config", "expected"),
    [
        (
            'time_column = "order_ts"\n',
            "reconciliations[0]: set key_column in [sources.orders], the column holding the keys",
        ),
        (
            'time_column = "order_ts"\nkey_column = "status; DROP TABLE orders"\n',
            "sources.orders: 'status; DROP TABLE orders' is not a plain identifier",
        ),
    ],
)
def test_a_key_list_reconciliation_needs_a_keyed_source(
    tmp_path: Path, source_config: str, expected: str
) -> None:
    project = example_project(tmp_path / "proj", deploy=False)
    config = project / "tidegate.toml"
    config.write_text(config.read_text().replace('time_column = "order_ts"\n', source_config))
    (project / "models" / f"{MODEL}.sql").write_text(
        KEYED_MODEL.replace("{target}", "sum(order_count)")
    )
    built = tidegate("build", "--project", project)
    assert built.exit_code == 2, built.stdout
    assert expected in built.stderr, built.stderr
    assert len(built.stderr.strip().splitlines()) == 1, built.stderr


def test_a_key_list_model_does_not_reconcile_with_a_model(tmp_path: Path) -> None:
    project = _keyed(example_project(tmp_path / "proj", deploy=False))
    header = KEYED_MODEL[: KEYED_MODEL.index("*/")].replace("{target}", "sum(order_count)")
    reading_a_model = header.replace('source = "orders"', 'source = "daily_revenue"') + (
        "*/\nSELECT status, sum(order_count) AS order_count, "
        "CAST(sum(gross_revenue) AS DECIMAL(18, 2)) AS gross\n"
        "FROM daily_revenue WHERE status = $key GROUP BY status\n"
    )
    (project / "models" / f"{MODEL}.sql").write_text(reading_a_model)
    built = tidegate("build", "--project", project)
    assert built.exit_code == 2, built.stdout
    assert (
        "reconciliations[0]: 'daily_revenue' is a model; a key-list model reconciles with a "
        "source's rows"
    ) in built.stderr, built.stderr
