"""`tidegate maintain`: the Iceberg tables kept small — leftover branches removed, snapshots older
than `[warehouse] keep` whose partitions were published again since expired, and the files no
kept snapshot references deleted (engines/iceberg_maintenance.py says what is kept and why)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from tidegate.domain.errors import UsageError
from tidegate.engines.factory import open_engine
from tidegate.ops.context import Context

if TYPE_CHECKING:
    from tidegate.engines.base import Engine
    from tidegate.engines.iceberg_maintenance import Maintenance
    from tidegate.engines.iceberg_tables import IcebergTables

NEEDS_ICEBERG = (
    "maintain maintains Iceberg tables (expires their old snapshots and files): "
    '[warehouse] tables = "iceberg"'
)


@dataclass(frozen=True)
class Maintained:
    keep: str
    before: datetime  # snapshots and files older than this may go
    dry_run: bool
    tables: tuple[Maintenance, ...]


def maintain(ctx: Context, model: str | None, dry_run: bool) -> Maintained:
    """Maintain every tidegate table (or MODEL's): with `dry_run`, only what would go."""
    warehouse = ctx.project.settings.warehouse
    if warehouse.tables != "iceberg":
        raise UsageError(NEEDS_ICEBERG)
    if model is not None:
        ctx.project.model(model)  # an unknown model is refused here
    before = ctx.clock.now() - timedelta(seconds=warehouse.keep_seconds)
    from tidegate.engines import iceberg_maintenance
    from tidegate.engines.iceberg_tables import MODEL_PROPERTY, IcebergTables

    # for writing: DuckDB's writer lock keeps every publish out while files are judged and
    # removed; Spark's publishes may run meanwhile (iceberg_maintenance.apply says why that is
    # safe)
    engine = open_engine(ctx.project, ctx.wait)
    try:
        tables = getattr(engine, "tables", None)
        if not isinstance(tables, IcebergTables):  # tables = "iceberg" opens an engine with them
            raise UsageError(NEEDS_ICEBERG)
        chosen = [
            (schema, name)
            for schema, name in tables.tables()
            if (model is None or name == model)
            and (table := tables.load(name, schema, fresh=True)) is not None
            and table.properties.get(MODEL_PROPERTY) == name
        ]
        if model is not None and not chosen:
            raise UsageError(
                f"{model} has no Iceberg table to maintain (it has not published yet, or "
                "publishes into the DuckDB file: cursor and update models)"
            )
        done = []
        for schema, name in chosen:
            planned = iceberg_maintenance.plan(tables, schema, name, before)
            if not dry_run and not planned.empty:
                _apply(engine, tables, planned)
            done.append(planned)
    finally:
        engine.close()
    return Maintained(warehouse.keep, before, dry_run, tuple(done))


def _apply(engine: Engine, tables: IcebergTables, planned: Maintenance) -> None:
    """Remove what was planned; a DuckDB copy, made from the table's metadata file before,
    recorded as made from the new one when main did not move (it holds the same rows)."""
    from tidegate.engines import iceberg_maintenance
    from tidegate.engines.duckdb_iceberg import DuckDBIcebergEngine

    table = tables.load(planned.name, planned.schema, fresh=True)
    if table is None:
        return
    began = (table.metadata_location, table.metadata.current_snapshot_id)
    iceberg_maintenance.apply(tables, planned)
    after = tables.load(planned.name, planned.schema, fresh=True)
    unmoved = after is not None and after.metadata.current_snapshot_id == began[1]
    if unmoved and isinstance(engine, DuckDBIcebergEngine):
        engine.mirror_unchanged(planned.schema, planned.name, began[0])
