"""Rows a program hands over as Arrow, made to fit the model's contract: the declared columns,
by name, each cast to its declared type where the cast loses nothing. Anything else fails the
attempt with the reason."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from tidegate.domain.errors import ModelError
from tidegate.domain.model import Column
from tidegate.engines.arrow_types import arrow_type


def as_arrow(result: Any) -> Any:
    """A Python model's result as a pyarrow.Table (pandas and polars are converted; neither is
    imported here: a result of theirs comes with its library loaded)."""
    if isinstance(result, pa.Table):
        return result
    library = type(result).__module__.split(".")[0]
    if library == "pandas":
        return pa.Table.from_pandas(result, preserve_index=False)
    if library == "polars":
        return result.to_arrow()
    raise ModelError(
        f"returned a {type(result).__name__}; a Python model returns a pyarrow.Table, "
        "a pandas or a polars DataFrame"
    )


def contract_schema(columns: Sequence[Column]) -> Any:
    """The Arrow schema of the declared columns."""
    fields = []
    for column in columns:
        found = arrow_type(column.type)
        if found is None:
            raise ModelError(
                f"column {column.name} is {column.type}, which rows handed over as Arrow "
                "cannot hold yet; declare another type"
            )
        fields.append(pa.field(column.name, found))
    return pa.schema(fields)


def check_names(names: Sequence[str], schema: Any) -> None:
    declared = list(schema.names)
    missing = [n for n in declared if n not in names]
    extra = [n for n in names if n not in declared]
    if missing or extra or len(set(names)) != len(names):
        parts = [
            *([f"missing column(s) {', '.join(missing)}"] if missing else []),
            *([f"undeclared column(s) {', '.join(extra)}"] if extra else []),
            *(["a column name repeats"] if len(set(names)) != len(names) else []),
        ]
        raise ModelError(
            f"returned columns do not match the declared ones: {'; '.join(parts)} "
            f"(declared: {', '.join(declared)})"
        )


def conform(data: Any, schema: Any) -> Any:
    """A table or record batch with exactly the declared columns, in order, cast safely."""
    check_names(list(data.schema.names), schema)
    arrays = []
    for target in schema:
        found = data.column(target.name)
        try:
            arrays.append(found.cast(target.type, safe=True))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            raise ModelError(
                f"column {target.name} is {found.type}, which does not cast safely to "
                f"{target.type}: {str(error).splitlines()[0]}"
            ) from None
    if isinstance(data, pa.Table):
        return pa.Table.from_arrays(arrays, schema=schema)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def conformed_reader(batches: Iterator[Any], schema: Any) -> Any:
    """A reader of the batches cast to the schema, one at a time."""
    return pa.RecordBatchReader.from_batches(schema, (conform(b, schema) for b in batches))
