"""The migration backfill the key-range tests share: the orders table gains `net_revenue`, and
the update model `orders_net_revenue` fills it in chunks of `order_id`."""

from __future__ import annotations

from pathlib import Path

import tidegate as package
from tests.kit import example_project, tidegate

MODEL = "orders_net_revenue"
EXAMPLE = Path(package.__file__).parent / "examples" / "migrations" / f"{MODEL}.toml"
EXPRESSION = "CAST(gross_amount - discount - refund AS DECIMAL(18, 2))"
# rows whose net_revenue is not the expression's value: what every test ends expecting none of
DIFFERING = f"SELECT count(*) FROM orders WHERE net_revenue IS DISTINCT FROM {EXPRESSION}"


def model_text(chunk_size: int) -> str:
    """The reference example (examples/migrations), in chunks of `chunk_size` ids."""
    text = EXAMPLE.read_text()
    assert text.count("chunk_size = 10000") == 1
    return text.replace("chunk_size = 10000", f"chunk_size = {chunk_size}")


def add_model(project: Path, chunk_size: int) -> None:
    """Declare the update model, build and deploy it."""
    (project / "models" / f"{MODEL}.toml").write_text(model_text(chunk_size))
    built = tidegate("build", "--project", project)
    assert built.exit_code == 0, built.stderr
    deployed = tidegate("deploy", MODEL, "--project", project)
    assert deployed.exit_code == 0, deployed.stderr


def duckdb_project(target: Path, rows_per_day: int, chunk_size: int) -> Path:
    """The orders example on DuckDB with the new, empty column and the update model."""
    import duckdb

    example_project(target, rows_per_day, deploy=False)
    con = duckdb.connect(str(target / "warehouse.duckdb"))
    try:
        con.execute("ALTER TABLE orders ADD COLUMN net_revenue DECIMAL(18, 2)")
    finally:
        con.close()
    add_model(target, chunk_size)
    return target
