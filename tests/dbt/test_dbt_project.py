"""tidegate controls the unmodified fixture dbt project on DuckDB: dbt compiles, tidegate
stages, audits and publishes into the relations dbt would build; plain dbt keeps working in the
same folder, and both give the same rows."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.dbt import kit

pytestmark = pytest.mark.slow


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> kit.Shop:
    return kit.duckdb_shop(tmp_path, monkeypatch)


def plain_dbt(shop: kit.Shop, tmp_path: Path) -> Path:
    """Plain `dbt build` on the same folder into a DuckDB file of its own with the same raw
    rows; its artifacts outside the project."""
    tmp_path.mkdir(exist_ok=True)
    plain = tmp_path / "plain.duckdb"
    kit.load_raw_duckdb(plain, shop.days)
    kit.dbt_ok(
        shop.dbt,
        "build",
        *kit.event_time_bounds(shop.days),
        "--target-path",
        str(tmp_path / "plain-target"),
        "--log-path",
        str(tmp_path / "plain-logs"),
        env=kit.duckdb_env(plain),
    )
    return plain


def document(shop: kit.Shop, *args: str, code: int = 0) -> dict:
    return json.loads(kit.cli(shop.root, *args, "--json", code=code).stdout)


def published(shop: kit.Shop, table: str) -> list[tuple]:
    with duckdb.connect(str(shop.warehouse), read_only=True) as con:
        return sorted(con.execute(f'SELECT * FROM main."{table}"').fetchall(), key=repr)


def test_tidegate_publishes_what_plain_dbt_builds_and_writes_nothing_into_the_project(
    shop: kit.Shop, tmp_path: Path
) -> None:
    before = kit.listing(shop.dbt)
    plain_before = plain_dbt(shop, tmp_path)
    built = document(shop, "build")
    assert sorted(m["model"] for m in built["models"]) == sorted(kit.MODELS)
    assert built["dbt"]["models"] == sorted(kit.MODELS)
    assert built["dbt"]["inlined"] == ["int_order_payments"]
    assert built["dbt"]["left_to_dbt"] == [] and built["dbt"]["tests_not_run"] == []
    kit.release(shop)
    for table in kit.MODELS:
        kit.same_rows_duckdb(plain_before, shop.warehouse, table)
    # plain dbt still builds from the same folder, and tidegate left it as it was
    plain_after = plain_dbt(shop, tmp_path / "again")
    for table in kit.MODELS:
        kit.same_rows_duckdb(plain_after, shop.warehouse, table)
    assert kit.listing(shop.dbt) == before
    shown = document(shop, "show", "partition", "orders", "2025-01-02")
    assert shown["published"]["version"]["dbt"]["node"] == "model.jaffle.orders"
    checks = {c["name"]: c for c in shown["published"]["checks"]}
    assert {
        "unique_orders_order_id",
        "not_null_orders_order_id",
        "assert_no_negative_amounts",
    } <= set(checks)
    assert any(name.startswith("relationships_orders_customer_id") for name in checks)
