"""How a tidegate table maps onto Iceberg: its schema (through Arrow), its partition spec (the
model's grain as an Iceberg transform), the filter of a publish's window, and Iceberg's types as
DuckDB names them."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import date, datetime
from typing import Any

from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
    GreaterThanOrEqual,
    LessThan,
    Reference,
)
from pyiceberg.expressions.literals import literal
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform, MonthTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from tidegate.domain.errors import EngineError

# the first id of partition fields (Iceberg's convention: 1000 and up)
PARTITION_FIELD_BASE = 1000

_DUCKDB_NAMES: dict[type[IcebergType], str] = {
    BooleanType: "BOOLEAN",
    IntegerType: "INTEGER",
    LongType: "BIGINT",
    FloatType: "FLOAT",
    DoubleType: "DOUBLE",
    DateType: "DATE",
    TimeType: "TIME",
    TimestampType: "TIMESTAMP",
    TimestamptzType: "TIMESTAMP WITH TIME ZONE",
    StringType: "VARCHAR",
    UUIDType: "UUID",
    BinaryType: "BLOB",
    FixedType: "BLOB",
}

# the Iceberg transform partitioning by each time grain
TIME_TRANSFORMS = {"hour": HourTransform, "day": DayTransform, "month": MonthTransform}


def duckdb_type(field_type: IcebergType) -> str:
    """The DuckDB type a column of this Iceberg type reads as."""
    if isinstance(field_type, DecimalType):
        return f"DECIMAL({field_type.precision}, {field_type.scale})"
    name = _DUCKDB_NAMES.get(type(field_type))
    if name is None:
        raise EngineError(f"iceberg: a column of type {field_type} cannot be read by DuckDB here")
    return name


def schema_of(arrow_schema: Any, required: Collection[str] = ()) -> Schema:
    """The Iceberg schema of Arrow columns, ids assigned in order; the `required` ones may hold
    no NULL (as NOT NULL columns of a table the engine creates)."""
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import assign_fresh_schema_ids

    try:
        converted = assign_fresh_schema_ids(Catalog._convert_schema_if_needed(arrow_schema))
    except (ValueError, TypeError) as error:
        raise EngineError(f"iceberg: cannot store these columns: {error}") from None
    return Schema(
        *(
            field.model_copy(update={"required": field.name in required})
            for field in converted.fields
        )
    )


def partition_spec(schema: Schema, column: str, grain: str | None) -> PartitionSpec:
    """Partitions by the model's grain: day(col), month(col), hour(col) for time grains on a
    date or timestamp column, identity(col) for a key list; otherwise none (a whole table, or a
    column no transform applies to)."""
    field = schema.find_field(column) if column in schema.column_names else None
    if field is None or grain is None:
        return UNPARTITIONED_PARTITION_SPEC
    if grain == "key":
        transform: Any = IdentityTransform()
    elif grain in TIME_TRANSFORMS and isinstance(
        field.field_type, (DateType, TimestampType, TimestamptzType)
    ):
        if grain == "hour" and isinstance(field.field_type, DateType):
            return UNPARTITIONED_PARTITION_SPEC
        transform = TIME_TRANSFORMS[grain]()
    else:
        return UNPARTITIONED_PARTITION_SPEC
    return PartitionSpec(
        PartitionField(
            source_id=field.field_id,
            field_id=PARTITION_FIELD_BASE,
            transform=transform,
            name=f"{column}_{grain}",
        )
    )


def window_filter(schema: Schema, column: str, bounds: Mapping[str, Any]) -> BooleanExpression:
    """The rows of a publish's window, as an Iceberg filter: [$start, $end) of the partition
    column, = $key, or every row (a whole table)."""
    if "key" in bounds:
        return EqualTo(term=Reference(column), value=literal(bounds["key"]))
    if "start" not in bounds:
        return AlwaysTrue()
    field_type = schema.find_field(column).field_type
    start, end = (_literal(field_type, bounds[b]) for b in ("start", "end"))
    return And(
        GreaterThanOrEqual(term=Reference(column), value=literal(start)),
        LessThan(term=Reference(column), value=literal(end)),
    )


def _literal(field_type: IcebergType, value: Any) -> Any:
    """A window bound as the column's type reads it (the bounds are naive UTC instants)."""
    if isinstance(value, datetime):
        if isinstance(field_type, DateType):
            return value.date().isoformat()
        if isinstance(field_type, TimestamptzType):
            return value.isoformat() + "+00:00"
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


def conform(rows: Any, schema: Schema, table_name: str) -> Any:
    """Arrow rows as the table's schema takes them: its columns in its order (one the rows lack
    is NULL), its types, a required column refused when it holds a NULL — before Iceberg's own
    check, which prints to stdout."""
    import pyarrow as pa

    target = schema.as_arrow()
    columns = []
    for field in target:
        if field.name in rows.column_names:
            values = rows.column(field.name)
        else:
            values = pa.nulls(rows.num_rows, field.type)
        if not field.nullable and values.null_count:
            raise EngineError(
                f"iceberg: {table_name}.{field.name} requires a value in every row; "
                f"{values.null_count} rows hold NULL"
            )
        try:
            columns.append(values.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            raise EngineError(
                f"iceberg: {table_name}.{field.name} cannot be stored as {field.type}: {error}"
            ) from None
    return pa.Table.from_arrays(columns, schema=target)
