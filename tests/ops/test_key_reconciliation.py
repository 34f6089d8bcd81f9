"""A key-list model reconciles each key with the rows of a source that hold it (the model names
the source's column of its keys in `key_sources`), on DuckDB and PostgreSQL: results recorded
per partition, a mismatch keeps the key unpublished, and each key gets its own input
fingerprint. Expected values come from the warehouse directly, never from tidegate."""

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
key_sources = { orders = "{keys_in}" }

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
# Another key-list model over the same source, keyed by customer and reading all of it.
BY_CUSTOMER = """/* tidegate
grain = "key"
key_column = "customer"
keys = ["{customer}"]

[columns]
customer = "VARCHAR NOT NULL"
order_count = "BIGINT NOT NULL"
*/
SELECT CAST(customer_id AS VARCHAR) AS customer, count(*) AS order_count
FROM orders WHERE CAST(customer_id AS VARCHAR) = $key GROUP BY customer_id
"""

Query = Callable[[str], list[tuple[Any, ...]]]


def keyed_model(target: str = "sum(order_count)", keys_in: str = "status") -> str:
    return KEYED_MODEL.replace("{target}", target).replace("{keys_in}", keys_in)


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def keyed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Query]]:
    """The orders example, undeployed, and a query on its warehouse."""
    if request.param == "postgres":
        with fresh_database("keyrec") as dsn:
            project = postgres_project(tmp_path / "proj", dsn, deploy=False)
            yield project, lambda sql: rows(dsn, sql)
        return
    project = example_project(tmp_path / "proj", deploy=False)
    yield project, lambda sql: warehouse_rows(project, sql)


def deploy(project: Path, model: str = MODEL, text: str | None = None) -> None:
    (project / "models" / f"{model}.sql").write_text(keyed_model() if text is None else text)
    for args in (("build",), ("deploy", model)):
        done = tidegate(*args, "--project", project)
        assert done.exit_code == 0, (args, done.stdout, done.stderr)


def assert_nothing_published(query: Query) -> None:
    # a first publish creates the model's table in its transaction
    tables = f"SELECT count(*) FROM information_schema.tables WHERE table_name = '{MODEL}'"
    assert query(tables) == [(0,)]


def run_key(project: Path, key: str, model: str = MODEL) -> Any:
    return tidegate("run", model, "--partition", key, "--json", "--project", project)


def reconciliations(project: Path, key: str) -> dict[str, dict[str, Any]]:
    shown = show_partition(project, MODEL, key)["published"]
    return {r["name"]: r for r in shown["reconciliations"]}


def source_input(project: Path, model: str, key: str) -> dict[str, Any]:
    inputs = show_partition(project, model, key)["published"]["inputs"]
    [found] = [i for i in inputs if i["upstream"] == "orders"]
    return dict(found)


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
        assert source_input(project, MODEL, key)["range"] == f"status = {key}"
    # the two keys read different rows: neither is the whole source
    [(everything,)] = query("SELECT count(*) FROM orders")
    counted = [
        int(reconciliations(project, k)["orders"]["source_value"])
        for k in ("completed", "cancelled")
    ]
    assert sum(counted) < everything


def test_a_mismatch_keeps_the_key_unpublished(keyed: tuple[Path, Query]) -> None:
    project, query = keyed
    deploy(project, text=keyed_model(target="sum(order_count) + 1"))
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
    project = example_project(tmp_path / "proj", deploy=False)
    deploy(project)
    for key in ("completed", "cancelled"):
        assert run_key(project, key).exit_code == 0
    before = {k: source_input(project, MODEL, k)["fingerprint"] for k in ("completed", "cancelled")}
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
    after = {k: source_input(project, MODEL, k)["fingerprint"] for k in ("completed", "cancelled")}
    assert after["completed"] == before["completed"]
    assert after["cancelled"] != before["cancelled"]


def test_another_key_list_model_over_the_same_source_still_reads_all_of_it(
    tmp_path: Path,
) -> None:
    """The key column belongs to the model that declares it, not to the source."""
    project = example_project(tmp_path / "proj", deploy=False)
    deploy(project)
    [(customer,)] = warehouse_rows(project, "SELECT CAST(min(customer_id) AS VARCHAR) FROM orders")
    deploy(project, "by_customer", BY_CUSTOMER.replace("{customer}", customer))
    ran = run_key(project, customer, "by_customer")
    assert ran.exit_code == 0, (ran.stdout, ran.stderr)
    read = source_input(project, "by_customer", customer)
    [(everything,)] = warehouse_rows(project, "SELECT count(*) FROM orders")
    assert read["range"] == "all rows"
    assert read["fingerprint"].startswith(f"{everything}:")


def test_the_key_column_is_checked_before_deploy_and_part_of_the_version(
    tmp_path: Path,
) -> None:
    project = example_project(tmp_path / "proj", deploy=False)
    (project / "models" / f"{MODEL}.sql").write_text(keyed_model(keys_in="stauts"))
    assert tidegate("build", "--project", project).exit_code == 0
    refused = tidegate("deploy", MODEL, "--project", project)
    assert refused.exit_code == 3, refused.stdout
    assert "source orders: no column stauts (key_sources)" in refused.stderr, refused.stderr
    (project / "models" / f"{MODEL}.sql").write_text(keyed_model())
    assert tidegate("build", "--project", project).exit_code == 0
    events = tidegate("history", MODEL, "--json", "--project", project).json()["events"]
    built = [(e["detail"]["seq"], e["version_id"]) for e in events if e["kind"] == "build"]
    # the corrected key column is another version
    assert [seq for seq, _ in built] == [1, 2]
    assert built[0][1] != built[1][1]


@pytest.mark.parametrize(
    ("model_text", "expected"),
    [
        (
            keyed_model().replace('key_sources = { orders = "status" }\n', ""),
            'reconciliations[0]: declare key_sources = { orders = "COLUMN" }, the column of '
            "orders holding the keys",
        ),
        (
            keyed_model(keys_in="status; DROP TABLE orders"),
            "key_sources.orders: 'status; DROP TABLE orders' is not a plain identifier",
        ),
        (
            keyed_model().replace("{ orders =", "{ payments ="),
            "key_sources.payments: not a source the model reads",
        ),
    ],
)
def test_a_key_list_reconciliation_needs_the_sources_key_column(
    tmp_path: Path, model_text: str, expected: str
) -> None:
    project = example_project(tmp_path / "proj", deploy=False)
    (project / "models" / f"{MODEL}.sql").write_text(model_text)
    built = tidegate("build", "--project", project)
    assert built.exit_code == 2, built.stdout
    assert expected in built.stderr, built.stderr
    assert len(built.stderr.strip().splitlines()) == 1, built.stderr


def test_only_a_key_list_model_declares_key_sources(tmp_path: Path) -> None:
    project = example_project(tmp_path / "proj", deploy=False)
    daily = project / "models" / "daily_revenue.sql"
    text = daily.read_text()
    assert 'grain = "day"\n' in text
    daily.write_text(
        text.replace('grain = "day"\n', 'grain = "day"\nkey_sources = { orders = "status" }\n', 1)
    )
    built = tidegate("build", "--project", project)
    assert built.exit_code == 2, built.stdout
    assert "key_sources: only a key-list model reads a source by its keys" in built.stderr


def test_a_key_list_model_does_not_reconcile_with_a_model(tmp_path: Path) -> None:
    project = example_project(tmp_path / "proj", deploy=False)
    header = keyed_model()[: keyed_model().index("*/")]
    reading_a_model = (
        header.replace('key_sources = { orders = "status" }\n', "").replace(
            'source = "orders"', 'source = "daily_revenue"'
        )
        + "*/\nSELECT status, sum(order_count) AS order_count, "
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
