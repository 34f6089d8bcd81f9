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
    kit.plain_build_elsewhere(shop.dbt, shop.days, kit.duckdb_env(plain), tmp_path)
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
    kit.assert_dbt_provenance(document(shop, "show", "partition", "orders", "2025-01-02"))


def test_a_failing_dbt_test_blocks_the_publish_and_keeps_the_old_partition(
    shop: kit.Shop,
) -> None:
    kit.release(shop)
    before = published(shop, "orders")
    with duckdb.connect(str(shop.warehouse)) as con:
        # a refund booked as a negative payment on the second day: the singular test fails
        con.execute(
            "UPDATE raw.payments SET amount_cents = -5000 "
            "WHERE paid_at >= TIMESTAMP '2025-01-02' AND paid_at < TIMESTAMP '2025-01-03'"
        )
    kit.cli(shop.root, "backfill", "stg_payments", "--partitions", "2025-01-02")
    failed = document(shop, "run", "orders", "--partition", "2025-01-02", code=1)
    [partition] = failed["partitions"]
    assert partition["state"] == "failed" and "assert_no_negative_amounts" in partition["reason"]
    assert published(shop, "orders") == before
    # the warn test on stg_payments.method failed on a day with a gift card payment, and the
    # day was published anyway
    warned = []
    for day in range(1, shop.days + 1):
        shown = document(shop, "show", "partition", "stg_payments", f"2025-01-{day:02d}")
        warned += [
            c
            for c in shown["published"]["checks"]
            if c["name"].startswith("accepted_values") and not c["passed"]
        ]
    assert warned and {c["severity"] for c in warned} == {"warn"}


def test_an_edit_to_an_unrelated_model_makes_no_new_version(shop: kit.Shop) -> None:
    first = {m["model"]: m for m in document(shop, "build")["models"]}
    customers = shop.dbt / "models" / "marts" / "customers.sql"
    customers.write_text(customers.read_text() + "\n-- a note\n")
    second = {m["model"]: m for m in document(shop, "build")["models"]}
    assert second["customers"]["created"]
    assert second["customers"]["version_id"] != first["customers"]["version_id"]
    for model in set(kit.MODELS) - {"customers"}:
        assert second[model]["version_id"] == first[model]["version_id"], model
        assert not second[model]["created"], model
    # a macro is part of the models that call it, and of no other
    macro = shop.dbt / "macros" / "cents_to_dollars.sql"
    macro.write_text(macro.read_text().replace("100.0", "100.00"))
    third = {m["model"]: m for m in document(shop, "build")["models"]}
    assert third["stg_payments"]["created"]
    assert not third["stg_orders"]["created"] and not third["stg_customers"]["created"]


def test_a_dbt_compile_error_is_one_line_naming_the_node_and_file(shop: kit.Shop) -> None:
    orders = shop.dbt / "models" / "marts" / "orders.sql"
    orders.write_text(orders.read_text().replace("ref('stg_orders')", "ref('stg_order')"))
    failed = kit.cli(shop.root, "build", code=2)
    [line] = failed.stderr.strip().splitlines()
    assert line.startswith("error: tidegate.toml: dbt compile failed: ")
    assert "orders" in line and "models/marts/orders.sql" in line and "stg_order" in line
    # dbt's whole output is kept, its own messages on stdout included
    log = (shop.root / ".tidegate" / "dbt" / "compile.log").read_text()
    assert "stg_order" in log
    assert kit.cli(shop.root, "status", code=2).stderr == failed.stderr


def test_an_empty_day_is_skipped_never_a_placeholder_row(shop: kit.Shop) -> None:
    kit.release(shop)
    after = f"{kit.BEGIN.replace(day=kit.BEGIN.day + shop.days).isoformat()}"
    events = kit.cli_events(
        shop.root, "backfill", "stg_orders", "--partitions", after, "--json", code=1
    )
    [skipped] = [e for e in events.events if e["event"] == "partition"]
    assert skipped["state"] == "skipped" and "raw_orders has 0 row(s)" in skipped["reason"]
    events = kit.cli_events(
        shop.root, "backfill", "orders", "--partitions", after, "--json", code=1
    )
    [waiting] = [e for e in events.events if e["event"] == "partition"]
    assert waiting["state"] == "skipped" and "stg_orders" in waiting["reason"]
    with duckdb.connect(str(shop.warehouse), read_only=True) as con:
        nulls = con.execute("SELECT count(*) FROM orders WHERE order_id IS NULL").fetchone()
    assert nulls == (0,)


def test_a_partitioned_model_reads_a_source_without_an_event_time_whole(
    shop: kit.Shop, tmp_path: Path
) -> None:
    named = shop.dbt / "models" / "marts" / "named_orders.sql"
    named.write_text(
        "{{ config(materialized='table', meta={'tidegate': {'grain': 'day', "
        "'time_column': 'ordered_at'}}) }}\n"
        "select o.order_id, o.ordered_at, c.name\n"
        "from {{ ref('stg_orders') }} o\n"
        "join {{ source('raw', 'customers') }} c on c.id = o.customer_id\n"
    )
    plain = plain_dbt(shop, tmp_path)
    kit.release(shop, (*kit.MODELS, "named_orders"))
    kit.same_rows_duckdb(plain, shop.warehouse, "named_orders")
    shown = document(shop, "show", "partition", "named_orders", "2025-01-03")
    reads = {r["upstream"]: r for r in shown["published"]["inputs"]}
    assert set(reads) == {"stg_orders", "raw_customers"}
    assert reads["raw_customers"]["range"].startswith("2025-01-03T00:00:00")


def test_what_an_inlined_ephemeral_model_reads_whole_is_recorded_whole(shop: kit.Shop) -> None:
    kit.release(shop)
    # orders reads stg_orders by its window, and stg_payments whole through the ephemeral model
    shown = document(shop, "show", "partition", "orders", "2025-01-02")
    reads = {r["upstream"]: r["range"] for r in shown["published"]["inputs"]}
    assert reads["stg_orders"] == "2025-01-02"
    assert reads["stg_payments"] == shop.window
    with duckdb.connect(str(shop.warehouse)) as con:
        con.execute(
            "UPDATE raw.payments SET amount_cents = amount_cents + 1 "
            "WHERE paid_at >= TIMESTAMP '2025-01-04' AND paid_at < TIMESTAMP '2025-01-05'"
        )
    kit.cli(shop.root, "backfill", "stg_payments", "--partitions", "2025-01-04")
    status = {m["model"]: m["partitions"] for m in document(shop, "status")["models"]}
    # every day of orders read the changed day, and so, through them, every day of daily_revenue
    assert status["orders"]["upstream_changed"] == shop.days
    assert status["daily_revenue"]["upstream_changed"] == shop.days
    assert status["stg_orders"]["upstream_changed"] == 0


def test_dbt_compiles_again_only_when_what_it_reads_changed(shop: kit.Shop) -> None:
    kit.cli(shop.root, "build")
    log = shop.root / ".tidegate" / "dbt" / "compile.log"
    compiled = log.stat().st_mtime_ns
    # a warehouse file or a virtual environment beside the models is no part of the project
    (shop.dbt / "dev.duckdb").write_bytes(b"rows")
    (shop.dbt / ".venv").mkdir()
    (shop.dbt / ".venv" / "site.py").write_text("x = 1\n")
    kit.cli(shop.root, "status")
    assert log.stat().st_mtime_ns == compiled
    # a model's file is
    (shop.dbt / "models" / "marts" / "customers.sql").write_text(
        (shop.dbt / "models" / "marts" / "customers.sql").read_text() + "\n"
    )
    kit.cli(shop.root, "status")
    assert log.stat().st_mtime_ns > compiled
