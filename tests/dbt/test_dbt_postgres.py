"""tidegate controls the unmodified fixture dbt project on PostgreSQL (dbt-postgres): dbt
compiles, tidegate stages, audits and publishes into the schema the profile's target builds
into; plain dbt builds the same rows into a schema of its own, keeps building from the same
folder afterwards, and tidegate writes nothing into the folder."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.dbt import kit

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@dataclass(frozen=True)
class Schemas:
    """This test's schemas (unique names): plain dbt's, tidegate's, a second plain build's,
    and the raw schemas of the first two."""

    plain: str
    plain_raw: str
    tidegate: str
    tidegate_raw: str
    again: str

    def all(self) -> tuple[str, ...]:
        return (self.plain, self.plain_raw, self.tidegate, self.tidegate_raw, self.again)


@pytest.fixture
def schemas(tmp_path: Path) -> Iterator[Schemas]:
    """Unique schemas, dropped afterwards, with what tidegate itself left in the database
    during the test (kit.drop_tidegate_leftovers)."""
    base = f"tg_dbt_{uuid.uuid4().hex[:12]}"
    names = Schemas(base, f"{base}_raw", f"{base}_tg", f"{base}_tg_raw", f"{base}_again")
    before = kit.tidegate_schemas(kit.POSTGRES)
    try:
        yield names
    finally:
        kit.drop_postgres_schemas(kit.POSTGRES, *names.all())
        kit.drop_tidegate_leftovers(kit.POSTGRES, before, tmp_path / kit.SHOP_LEDGER)


def plain_dbt(shop: kit.PostgresShop, tmp_path: Path, schema: str, raw_schema: str) -> None:
    """Plain `dbt build` on the same folder into `schema`, reading raw rows from `raw_schema`;
    its artifacts outside the project."""
    kit.plain_build_elsewhere(shop.dbt, shop.days, kit.postgres_env(schema, raw_schema), tmp_path)


def test_tidegate_publishes_what_plain_dbt_builds_on_postgres(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, schemas: Schemas
) -> None:
    shop = kit.postgres_shop(tmp_path, monkeypatch, schemas.tidegate, schemas.tidegate_raw)
    before = kit.listing(shop.dbt)
    toml = (shop.root / "tidegate.toml").read_text()
    assert 'engine = "postgres"' in toml and f'schema = "{schemas.tidegate}"' in toml, toml
    kit.load_raw_postgres(kit.POSTGRES, schemas.plain_raw, shop.days)
    plain_dbt(shop, tmp_path / "plain", schemas.plain, schemas.plain_raw)
    built = kit.cli(shop.root, "build", "--json").json()
    assert sorted(m["model"] for m in built["models"]) == sorted(kit.MODELS)
    assert built["dbt"]["models"] == sorted(kit.MODELS)
    assert built["dbt"]["inlined"] == ["int_order_payments"]
    assert built["dbt"]["left_to_dbt"] == [] and built["dbt"]["tests_not_run"] == []
    kit.release(shop)
    for table in kit.MODELS:
        kit.same_rows_postgres(kit.POSTGRES, schemas.plain, schemas.tidegate, table)
    # plain dbt still builds from the same folder, and tidegate left it as it was
    plain_dbt(shop, tmp_path / "again", schemas.again, schemas.plain_raw)
    for table in kit.MODELS:
        kit.same_rows_postgres(kit.POSTGRES, schemas.again, schemas.tidegate, table)
    assert kit.listing(shop.dbt) == before
    kit.assert_dbt_provenance(
        kit.cli(shop.root, "show", "partition", "orders", "2025-01-02", "--json").json()
    )


def test_same_rows_postgres_sees_a_missing_duplicate_and_a_changed_value(
    schemas: Schemas,
) -> None:
    contents = {
        schemas.plain: [(1, "a"), (1, "a"), (2, "b")],
        schemas.plain_raw: [(2, "b"), (1, "a"), (1, "a")],
        schemas.tidegate: [(1, "a"), (2, "b"), (2, "b")],
        schemas.tidegate_raw: [(1, "a"), (1, "a"), (2, "c")],
    }
    table = 'odd "name"'
    with psycopg.connect(kit.POSTGRES, autocommit=True, connect_timeout=10) as con:
        for schema, rows in contents.items():
            con.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            name = sql.Identifier(schema, table)
            con.execute(sql.SQL("CREATE TABLE {} (id INTEGER, v VARCHAR)").format(name))
            with con.cursor() as cursor:
                cursor.executemany(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(name), rows)
    kit.same_rows_postgres(kit.POSTGRES, schemas.plain, schemas.plain_raw, table)
    for other in (schemas.tidegate, schemas.tidegate_raw):
        with pytest.raises(AssertionError, match="rows of"):
            kit.same_rows_postgres(kit.POSTGRES, schemas.plain, other, table)
