"""Column types (the project dialect's spelling) as Arrow types and back: what rows handed over
as Arrow (a Python model's result, a command's Parquet files) are cast to, and what a staging
table made from Arrow rows declares."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from sqlglot import exp

from tidegate.sql.model_sql import DIALECT

T = exp.DataType.Type
SIMPLE: dict[Any, Any] = {
    T.TINYINT: pa.int8(),
    T.SMALLINT: pa.int16(),
    T.INT: pa.int32(),
    T.BIGINT: pa.int64(),
    T.FLOAT: pa.float32(),
    T.DOUBLE: pa.float64(),
    T.BOOLEAN: pa.bool_(),
    T.TEXT: pa.string(),
    T.VARCHAR: pa.string(),
    T.DATE: pa.date32(),
    T.TIMESTAMP: pa.timestamp("us"),
    T.TIMESTAMPNTZ: pa.timestamp("us"),
    T.TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
}


def arrow_type(type_text: str) -> Any | None:
    """The Arrow type of a column type, None when rows of it cannot be handed over as Arrow."""
    data_type = exp.DataType.build(type_text, dialect=DIALECT)
    if data_type.this == T.DECIMAL:
        # DuckDB's DECIMAL is DECIMAL(18, 3); DECIMAL(p) has no fraction
        params = [int(e.sql()) for e in data_type.expressions]
        precision = params[0] if params else 18
        scale = params[1] if len(params) > 1 else (0 if params else 3)
        return pa.decimal128(precision, scale)
    return SIMPLE.get(data_type.this)


def column_type(arrow: Any) -> str:
    """The column type (project dialect) that holds values of an Arrow type."""
    if pa.types.is_decimal(arrow):
        return f"DECIMAL({arrow.precision}, {arrow.scale})"
    if pa.types.is_timestamp(arrow):
        return "TIMESTAMPTZ" if arrow.tz else "TIMESTAMP"
    for type_id, candidate in SIMPLE.items():
        if candidate == arrow:
            return str(exp.DataType.build(type_id).sql(dialect=DIALECT))
    if pa.types.is_large_string(arrow) or pa.types.is_string_view(arrow):
        return "TEXT"
    raise ValueError(f"no column type holds Arrow {arrow}")
