"""Update models: `models/NAME.toml` with `write_mode = "update"`, columns of an existing table
filled or recomputed in place, one key range per transaction (the migration backfill).

```toml
write_mode = "update"
table = "orders"                  # exists already; tidegate never creates, drops or replaces it
grain = "range"
key_column = "order_id"           # an integer key
chunk_size = 10000                # a partition: [k, k + 10000), k a multiple of 10000
lock_timeout = "2s"               # per lock wait (PostgreSQL), overridable by backfill flags
statement_timeout = "30s"         # per statement of a range's transaction

[set]
net_revenue = "CAST(gross_amount - discount - refund AS DECIMAL(18, 2))"
```
"""

from __future__ import annotations

from typing import Any

from tidegate.domain.errors import ConfigError, UsageError
from tidegate.domain.model import (
    CheckSpec,
    Column,
    ModelSpec,
    Severity,
    UpdateSpec,
    WriteMode,
)
from tidegate.domain.partitions import Grain
from tidegate.domain.throttle import parse_seconds
from tidegate.project.config import IDENTIFIER
from tidegate.project.model_file import ModelFile, UpdateHeader, validate_header
from tidegate.sql import nesting
from tidegate.sql.model_sql import predicate_problem
from tidegate.sql.statements import DIALECT
from tidegate.sql.updates import assignment_problem, preview, volatile_function

# what a value of the set columns is, as far as tidegate knows: the table holds the type
UNDECLARED_TYPE = "ANY"
# checks judged row by row in the update's transaction
UPDATE_CHECKS = ("not_null", "expression")
# declaration keys of other models that mean nothing here
NOT_FOR_UPDATES = (
    "time_column",
    "keys",
    "unique_key",
    "schedule",
    "deprecated",
    "reconciliations",
    "columns",
)


def update_model(path: str, text: str, data: dict[str, Any]) -> ModelFile:
    """An update model's validated declaration (`text`, parsed as `data`)."""
    header = validate_header(UpdateHeader, data, path, text, 1, 1)
    return ModelFile(
        path=path, header=header, header_text=text, header_first_line=1, sql="", sql_first_line=1
    )


def update_spec(model: ModelFile, name: str) -> ModelSpec:
    """The update model's spec, or a ConfigError naming the line at fault."""
    header = model.header
    if not isinstance(header, UpdateHeader):
        raise TypeError(f"{model.path} is not an update model")
    if header.grain is not Grain.RANGE or not header.key_column:
        raise ConfigError(
            model.path,
            'grain: an update model runs by key ranges: grain = "range", key_column and chunk_size',
            model.header_line("grain"),
        )
    for key in NOT_FOR_UPDATES:
        if key in header.model_fields_set:
            raise ConfigError(model.path, f"{key}: not for an update model", model.header_line(key))
    for field, value in (("table", header.table), ("key_column", header.key_column)):
        if not IDENTIFIER.match(value):
            raise ConfigError(
                model.path,
                f"{field}: {value!r} is not a plain identifier",
                model.header_line(field),
            )
    assignments = _assignments(model, header)
    names = {header.key_column, *(c for c, _ in assignments)}
    spec = ModelSpec(
        name=name,
        path=model.path,
        sql=preview(header.table, header.key_column, assignments),
        grain=Grain.RANGE,
        partition_column=header.key_column,
        columns=(
            Column(header.key_column, "BIGINT", False),
            *(Column(c, UNDECLARED_TYPE) for c, _ in assignments),
        ),
        start=header.start,
        write_mode=WriteMode.UPDATE,
        checks=_checks(model, header, names),
        chunk_size=header.chunk_size,
        update=UpdateSpec(
            header.table,
            assignments,
            _timeout(model, "lock_timeout", header.lock_timeout),
            _timeout(model, "statement_timeout", header.statement_timeout),
        ),
    )
    if spec.start is not None:
        try:
            spec.first_partition()
        except UsageError as error:
            raise ConfigError(model.path, f"start: {error}", model.header_line("start")) from None
    return spec


def _assignments(model: ModelFile, header: UpdateHeader) -> tuple[tuple[str, str], ...]:
    found = []
    for column, expression in header.assignments.items():
        line = model.header_line("set", column)
        if not IDENTIFIER.match(column):
            raise ConfigError(model.path, f"set.{column!r}: not a plain identifier", line)
        if column == header.key_column:
            raise ConfigError(model.path, f"set.{column}: the key column is not set", line)
        problem = assignment_problem(expression)
        if problem is not None:
            raise ConfigError(model.path, f"set.{column}: {expression!r} {problem}", line)
        found.append((column, expression))
    return tuple(found)


def _checks(model: ModelFile, header: UpdateHeader, names: set[str]) -> tuple[CheckSpec, ...]:
    """Row-wise checks, judged on the range's rows in the update's transaction."""
    checks: list[CheckSpec] = []
    for index, declared in enumerate(header.checks):
        if declared.type not in UPDATE_CHECKS:
            raise ConfigError(
                model.path,
                f"checks[{index}]: an update model takes {' and '.join(UPDATE_CHECKS)} checks",
                model.check_line(index, "type"),
            )
        params = declared.model_dump(exclude={"name", "severity", "type"}, exclude_none=True)
        for col in params.get("columns", []):
            if col not in names:
                raise ConfigError(
                    model.path,
                    f"checks[{index}]: column {col!r} is neither the key nor a set column",
                    model.check_line(index, "columns"),
                )
        invalid = predicate_problem(params["expression"]) if declared.type == "expression" else None
        if invalid is not None:
            raise ConfigError(
                model.path,
                f"checks[{index}]: expression {invalid}",
                model.check_line(index, "expression"),
            )
        if declared.type == "expression":
            volatile = volatile_function(nesting.parse_one(params["expression"], DIALECT))
            if volatile is not None:
                raise ConfigError(
                    model.path,
                    f"checks[{index}]: expression calls {volatile}, whose value is not the "
                    "row's alone",
                    model.check_line(index, "expression"),
                )
        name = declared.name or f"{declared.type}_{index}"
        if not IDENTIFIER.match(name) or name in {c.name for c in checks}:
            raise ConfigError(
                model.path,
                f"checks[{index}]: name {name!r} is not a unique plain identifier",
                model.check_line(index, "name"),
            )
        checks.append(CheckSpec(name, declared.type, Severity(declared.severity), params))
    return tuple(checks)


def _timeout(model: ModelFile, field: str, text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return parse_seconds(text, field)
    except UsageError as error:
        raise ConfigError(model.path, str(error), model.header_line(field)) from None
