"""A model file made into its declaration (a ModelSpec), every key and its SQL checked: the
parsing part of loading a project, imported only when a model file is not in the project
cache."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from tidegate.domain import schedule
from tidegate.domain.checks import duration_seconds
from tidegate.domain.errors import ConfigError, UsageError
from tidegate.domain.ids import looks_like_run_id
from tidegate.domain.model import (
    CheckSpec,
    Column,
    ModelSpec,
    Program,
    Reconciliation,
    Severity,
    Source,
    WriteMode,
)
from tidegate.domain.partitions import WHOLE_LABEL, Grain, parse_partition
from tidegate.project.config import (
    IDENTIFIER,
)
from tidegate.project.cursor_decl import cursor_column, cursor_keys_only_for_cursor, cursor_spec
from tidegate.project.flink_model import flink_spec
from tidegate.project.model_file import (
    FlinkHeader,
    ModelFile,
    ProgramHeader,
    UpdateHeader,
    read_model_file,
)
from tidegate.project.python_model import read_python_model
from tidegate.project.text_files import read_text, relative_path
from tidegate.project.toml_model import read_toml_model
from tidegate.project.update_model import update_spec
from tidegate.sql.model_sql import (
    BOUND_PARAMETERS,
    SqlProblem,
    aggregate_problem,
    columns_read,
    line_of,
    parameters,
    parse_query,
    parse_type,
    predicate_problem,
    referenced_tables,
    table_line,
)
from tidegate.sql.statements import (
    is_time_type,
    query_check_problem,
    relationships_sql,
)

if TYPE_CHECKING:
    pass

# Words a model may not be called: they are subcommands, or would read as one.
RESERVED_NAMES = frozenset({"resume", "stop", "list", "all", "status", "show", "run"})


def is_reserved(name: str) -> bool:
    """Whether no model may be called `name`: a subcommand, a word that reads as one, a run
    id, or a name of tidegate's own tables."""
    return name.lower() in RESERVED_NAMES or looks_like_run_id(name) or name.startswith("_tidegate")


def read_model(root: Path, file: Path) -> tuple[ModelFile, Program | None]:
    if file.suffix == ".py":
        return read_python_model(root, file)
    if file.suffix == ".toml":
        return read_toml_model(root, file)
    path = relative_path(root, file)
    return read_model_file(path, read_text(file, path)), None


def _check_name(name: str, path: str, sources: dict[str, Source]) -> None:
    if not IDENTIFIER.match(name):
        raise ConfigError(path, f"model name {name!r} must be letters, digits and _", 1)
    if is_reserved(name):
        raise ConfigError(path, f"model name {name!r} is reserved; rename the file", 1)
    if name in sources:
        raise ConfigError(path, f"model name {name!r} is also a source in tidegate.toml", 1)


def _columns(model: ModelFile) -> tuple[Column, ...]:
    columns = []
    for name, declared in model.header.columns.items():
        if not IDENTIFIER.match(name):
            raise ConfigError(
                model.path,
                f"columns.{name!r}: not a plain identifier",
                model.header_line("columns", name),
            )
        text = declared.strip()
        nullable = not text.upper().endswith("NOT NULL")
        if not nullable:
            text = text[: -len("NOT NULL")].strip()
        try:
            columns.append(Column(name, parse_type(text), nullable))
        except SqlProblem as problem:
            raise ConfigError(
                model.path, f"columns.{name}: {problem.message}", model.header_line("columns", name)
            ) from None
    return tuple(columns)


def _check_unique_key(model: ModelFile, columns: tuple[Column, ...]) -> None:
    """The unique key names output columns, each once; merge needs one; a write matched by it
    (merge, append with a key) needs it NOT NULL, since a NULL key never matches its own row
    and writing it again would add the row twice."""
    header = model.header
    declared = {c.name: c for c in columns}
    line = model.header_line("unique_key")
    for key in header.unique_key:
        if key not in declared:
            raise ConfigError(model.path, f"unique_key: {key!r} is not in columns", line)
    if len(set(header.unique_key)) != len(header.unique_key):
        raise ConfigError(model.path, "unique_key: repeated column", line)
    if header.write_mode == WriteMode.MERGE.value and not header.unique_key:
        raise ConfigError(
            model.path,
            "write_mode: merge needs unique_key (the columns that identify a row)",
            model.header_line("write_mode"),
        )
    if header.write_mode == WriteMode.OVERWRITE.value:
        return
    for key in header.unique_key:
        if declared[key].nullable:
            raise ConfigError(
                model.path,
                f"unique_key: {key!r} must be NOT NULL in columns: {header.write_mode} matches "
                "rows by their key, and a NULL key matches nothing",
                line,
            )


def _partitioning(model: ModelFile) -> tuple[str, tuple[str, ...]]:
    header = model.header
    cursor_keys_only_for_cursor(model)
    if header.grain is Grain.CURSOR:
        return cursor_column(model), ()
    if header.grain is Grain.TABLE:
        return _whole_table(model)
    if header.grain is Grain.KEY:
        if not header.key_column or not header.keys:
            raise ConfigError(
                model.path,
                "grain: a key grain needs key_column and keys",
                model.header_line("grain"),
            )
        if len(set(header.keys)) != len(header.keys):
            raise ConfigError(model.path, "keys: repeated key", model.header_line("keys"))
        return header.key_column, tuple(header.keys)
    if header.grain is Grain.RANGE:
        raise ConfigError(
            model.path,
            'grain: key ranges are for update models (write_mode = "update") for now',
            model.header_line("grain"),
        )
    if not header.time_column:
        raise ConfigError(
            model.path,
            f"time_column: required for a {header.grain.value} grain",
            model.header_line("grain"),
        )
    return header.time_column, ()


def _whole_table(model: ModelFile) -> tuple[str, tuple[str, ...]]:
    """A whole-table model: no partition column, and its one partition as its one key."""
    header = model.header
    if isinstance(header, ProgramHeader):
        raise ConfigError(
            model.path,
            'grain: a whole-table model is an SQL model for now (grain = "table" in a .sql file)',
            model.header_line("grain"),
        )
    model.refuse_declared(
        ("time_column", "key_column", "keys", "start"),
        lambda _: (
            'a whole-table model (grain = "table") has no partitions to declare; '
            f"its one partition is {WHOLE_LABEL!r}"
        ),
    )
    return "", (WHOLE_LABEL,)


def _checks(
    model: ModelFile,
    columns: tuple[Column, ...],
    partition_column: str,
    reads: set[str],
    sources: dict[str, Source],
    others: set[str],
) -> tuple[CheckSpec, ...]:
    column_names = {c.name for c in columns}
    checks: list[CheckSpec] = []
    seen: set[str] = set()
    for index, declared in enumerate(model.header.checks):
        params = declared.model_dump(exclude={"name", "severity", "type"}, exclude_none=True)
        named = [*params.get("columns", []), *([params["column"]] if "column" in params else [])]
        for col in named:
            if col not in column_names:
                key = "column" if col == params.get("column") else "columns"
                raise ConfigError(
                    model.path,
                    f"checks[{index}]: column {col!r} is not in columns",
                    model.check_line(index, key),
                )
        refused = predicate_problem(params["expression"]) if declared.type == "expression" else None
        if refused is None and declared.type == "expression":
            refused = unknown_columns(params["expression"], columns)
        if refused is not None:
            raise ConfigError(
                model.path,
                f"checks[{index}]: expression {refused}",
                model.check_line(index, "expression"),
            )
        problem = _check_problem(
            declared.type,
            params,
            {c.name: c.type for c in columns},
            model.header.grain,
            partition_column,
            reads,
            {name for name in reads if name in sources},
        )
        if problem is not None:
            key, message = problem
            raise ConfigError(
                model.path, f"checks[{index}]: {message}", model.check_line(index, key)
            )
        if declared.name is not None and not IDENTIFIER.match(declared.name):
            raise ConfigError(
                model.path,
                f"checks[{index}]: name {declared.name!r} is not a plain identifier",
                model.check_line(index, "name"),
            )
        name = declared.name or f"{declared.type}_{'_'.join(named) or index}"
        if name in seen:
            raise ConfigError(
                model.path,
                f"checks[{index}]: check name {name!r} repeats",
                model.check_line(index, "name"),
            )
        seen.add(name)
        if declared.type == "relationships":
            params["sql"] = _relationships(model, index, params, sources, others)
        checks.append(CheckSpec(name, declared.type, Severity(declared.severity), params))
    return tuple(checks)


def _relationships(
    model: ModelFile,
    index: int,
    params: dict[str, Any],
    sources: dict[str, Source],
    others: set[str],
) -> str:
    """A relationships check's SELECT of violating rows; `to` is another model or a source."""
    to = params["to"]
    if to not in others and to not in sources:
        raise ConfigError(
            model.path,
            f"checks[{index}]: to: {to!r} is not another model or a source",
            model.check_line(index, "to"),
        )
    if not IDENTIFIER.match(params["field"]):
        raise ConfigError(
            model.path,
            f"checks[{index}]: field: {params['field']!r} is not a plain identifier",
            model.check_line(index, "field"),
        )
    referenced = sources[to].table if to in sources else to
    return relationships_sql(params["column"], referenced, params["field"])


def _check_problem(
    kind: str,
    params: dict[str, Any],
    column_types: dict[str, str],
    grain: Grain,
    partition_column: str,
    reads: set[str],
    read_sources: set[str],
) -> tuple[str, str] | None:
    """(the key at fault, what is wrong) for settings a check's type alone does not rule out."""
    if kind == "row_count":
        if "relative_to" in params:
            return _relative_problem(params, grain, read_sources)
        for key in ("source", "min_ratio", "max_ratio"):
            if key in params:
                return key, f"{key} is for a relative row_count (relative_to = ...)"
        return _bounds_problem(params, "min", "max")
    if kind == "null_ratio" and not 0 <= params["max"] <= 1:
        return "max", "max is a fraction of the rows, from 0 to 1"
    if kind == "distinct_count":
        if "min" not in params and "max" not in params:
            return "type", "a distinct_count needs min or max"
        for key in ("min", "max"):
            if params.get(key, 0) < 0:
                return key, f"{key} must be 0 or more"
        return _bounds_problem(params, "min", "max")
    if kind == "freshness":
        if not grain.is_time:
            ended = f"a {grain.value} partition has no end to be fresh at"
            return "type", f"freshness needs a time grain: {ended}"
        column_type = column_types[params["column"]]
        if not is_time_type(column_type):
            return (
                "column",
                f"column {params['column']!r} is {column_type}, not a DATE or TIMESTAMP",
            )
        try:
            duration_seconds(params["max_age"])
        except ValueError as error:
            return "max_age", f"max_age: {error}"
    if kind == "query":
        problem = query_check_problem(params["sql"], partition_column, reads)
        if problem is not None:
            return "sql", f"sql: {problem}"
    return None


def _relative_problem(
    params: dict[str, Any], grain: Grain, read_sources: set[str]
) -> tuple[str, str] | None:
    for key in ("min", "max"):
        if key in params:
            return key, f"{key} counts rows; a relative row_count takes min_ratio or max_ratio"
    if "min_ratio" not in params and "max_ratio" not in params:
        return "relative_to", "a relative row_count needs min_ratio or max_ratio"
    for key in ("min_ratio", "max_ratio"):
        if params.get(key, 1) <= 0:
            return key, f"{key} must be above 0"
    if params["relative_to"] == "previous":
        if not grain.is_time:
            return "relative_to", 'relative_to = "previous" needs a time grain'
        if "source" in params:
            return "source", 'source is for relative_to = "source"'
    elif "source" not in params:
        return "relative_to", 'relative_to = "source" needs source = NAME'
    elif params["source"] not in read_sources:
        known = ", ".join(sorted(read_sources)) or "none"
        return "source", f"source {params['source']!r} is not a source the model reads ({known})"
    return _bounds_problem(params, "min_ratio", "max_ratio")


def _bounds_problem(params: dict[str, Any], low: str, high: str) -> tuple[str, str] | None:
    if low in params and high in params and params[low] > params[high]:
        return low, f"{low} is above {high}"
    return None


def declare(
    model: ModelFile,
    name: str,
    sources: dict[str, Source],
    model_names: set[str],
    program: Program | None,
) -> ModelSpec:
    _check_name(name, model.path, sources)
    if isinstance(model.header, UpdateHeader):
        return update_spec(model, name)
    header = model.header
    if header.write_mode == WriteMode.UPDATE.value:
        raise ConfigError(
            model.path,
            "write_mode: update fills columns of an existing table: declare it in a TOML "
            'model file with table, grain = "range", key_column, chunk_size and [set]',
            model.header_line("write_mode"),
        )
    columns = _columns(model)
    if isinstance(header, FlinkHeader):
        assert program is not None
        return flink_spec(model, name, columns, program)
    column_names = {c.name for c in columns}
    partition_column, keys = _partitioning(model)
    if header.grain is not Grain.TABLE and partition_column not in column_names:
        field = {Grain.KEY: "key_column", Grain.CURSOR: "cursor_column"}.get(
            header.grain, "time_column"
        )
        raise ConfigError(
            model.path,
            f"{field}: {partition_column!r} is not in columns",
            model.header_line(field),
        )
    _check_unique_key(model, columns)
    if header.start is not None:
        try:
            parse_partition(header.start, header.grain, keys)
        except UsageError as error:
            raise ConfigError(model.path, f"start: {error}", model.header_line("start")) from None
    for column, until in header.deprecated.items():
        if column not in column_names:
            raise ConfigError(
                model.path,
                f"deprecated: {column!r} is not in columns",
                model.header_line("deprecated", column),
            )
        try:
            valid = date.fromisoformat(until).isoformat() == until
        except ValueError:
            valid = False
        if not valid:
            raise ConfigError(
                model.path,
                f"deprecated.{column}: {until!r} is not a date (YYYY-MM-DD)",
                model.header_line("deprecated", column),
            )
    if header.schedule is not None and not schedule.is_valid(header.schedule):
        raise ConfigError(
            model.path,
            f'schedule: {header.schedule!r} is not a cron expression (e.g. "0 2 * * *", UTC)',
            model.header_line("schedule"),
        )
    reads = (
        _declared_reads(model, name, sources, model_names)
        if program is not None
        else _reads(model, sources, model_names, header.grain)
    )
    checks = _checks(model, columns, partition_column, reads, sources, model_names - {name})
    cursor = (
        cursor_spec(
            model,
            columns,
            {t for t in reads if t in model_names},
            {t for t in reads if t in sources},
            sources,
        )
        if header.grain is Grain.CURSOR
        else None
    )
    key_sources = _key_sources(model, reads, sources)
    reconciliations = _reconciliations(
        model, reads, sources, None if cursor is None else cursor.source, columns
    )
    return ModelSpec(
        name=name,
        path=model.path,
        sql=model.sql.strip(),
        grain=header.grain,
        partition_column=partition_column,
        columns=columns,
        start=header.start,
        keys=keys,
        write_mode=WriteMode(header.write_mode),
        unique_key=tuple(header.unique_key),
        schedule=header.schedule,
        deprecated=tuple(sorted(header.deprecated.items())),
        checks=checks,
        upstream=tuple(sorted(t for t in reads if t in model_names)),
        sources=tuple(sorted(t for t in reads if t in sources)),
        reconciliations=reconciliations,
        program=program,
        cursor=cursor,
        key_sources=key_sources,
        min_rows=header.min_rows,
    )


def _declared_reads(
    model: ModelFile, name: str, sources: dict[str, Source], model_names: set[str]
) -> set[str]:
    """What a program model declares it reads: upstream models and sources that exist."""
    header = model.header
    if not isinstance(header, ProgramHeader):
        raise TypeError(f"{model.path}: an SQL model's reads are inferred from its SELECT")
    for field, declared, known, what in (
        ("upstream", header.upstream, model_names - {name}, "a model of the project"),
        ("sources", header.sources, set(sources), "a source in tidegate.toml"),
    ):
        for table in declared:
            if table not in known:
                raise ConfigError(
                    model.path, f"{field}: {table!r} is not {what}", model.header_line(field)
                )
        if len(set(declared)) != len(declared):
            raise ConfigError(model.path, f"{field}: repeated name", model.header_line(field))
    return {*header.upstream, *header.sources}


# the placeholders a model's SELECT may hold, by grain (the time grains: $start and $end)
_PARAMETERS: dict[Grain, set[str]] = {Grain.KEY: {"key"}, Grain.TABLE: set()}


def _reads(
    model: ModelFile, sources: dict[str, Source], model_names: set[str], grain: Grain
) -> set[str]:
    """Sources and models the SQL reads; unknown tables and parameters are refused."""
    try:
        query = parse_query(model.sql)
    except SqlProblem as problem:
        # no line of its own (no statement at all): the SQL's first line
        line = model.sql_first_line + (problem.line or 1) - 1
        raise ConfigError(model.path, problem.message, line) from None
    allowed = _PARAMETERS.get(grain, {"start", "end"})
    for parameter in sorted(parameters(query)):
        if parameter not in allowed:
            hint = (
                f"use {', '.join(f'${p}' for p in sorted(allowed))}"
                if allowed
                else "a whole-table model reads its inputs whole"
            )
            unknown = "unknown" if parameter not in BOUND_PARAMETERS else "unavailable"
            raise ConfigError(
                model.path,
                f"${parameter} is an {unknown} parameter here ({hint})",
                # `$ name` is the parameter `$name` too
                _sql_line(model, f"${parameter}") or _sql_line(model, "$"),
            )
    reads = referenced_tables(query)
    for table in sorted(reads):
        if table not in sources and table not in model_names:
            raise ConfigError(
                model.path,
                f"reads unknown table {table!r} (declare it under [sources] or add a model)",
                _table_line(model, table, query),
            )
    return reads


def _table_line(model: ModelFile, table: str, query: exp.Query) -> int | None:
    found = table_line(model.sql, query, table)
    return _sql_line(model, table) if found is None else model.sql_first_line + found - 1


def upstream_line(model: ModelFile, table: str) -> int | None:
    """The line where `model` says it reads `table`: its `upstream` key (a program), or where
    its SQL names the table."""
    if isinstance(model.header, ProgramHeader):
        return model.header_line("upstream")
    return _table_line(model, table, parse_query(model.sql))


def _sql_line(model: ModelFile, word: str) -> int | None:
    found = line_of(model.sql, word)
    return None if found is None else model.sql_first_line + found - 1


def _key_sources(
    model: ModelFile, reads: set[str], sources: dict[str, Source]
) -> tuple[tuple[str, str], ...]:
    """A key-list model's column of each source that holds its keys."""
    declared = model.header.key_sources
    line = model.header_line("key_sources")
    if declared and model.header.grain is not Grain.KEY:
        raise ConfigError(
            model.path, "key_sources: only a key-list model reads a source by its keys", line
        )
    for name, column in declared.items():
        if name not in sources or name not in reads:
            raise ConfigError(model.path, f"key_sources.{name}: not a source the model reads", line)
        if not IDENTIFIER.match(column):
            raise ConfigError(
                model.path, f"key_sources.{name}: {column!r} is not a plain identifier", line
            )
    return tuple(sorted(declared.items()))


def _check_keyed_source(
    model: ModelFile, index: int, name: str, sources: dict[str, Source]
) -> None:
    """A key-list model reconciles each key with the rows of a source that hold the key."""
    if name not in sources:
        problem = f"{name!r} is a model; a key-list model reconciles with a source's rows"
    elif name not in model.header.key_sources:
        problem = (
            f'declare key_sources = {{ {name} = "COLUMN" }}, the column of {name} holding the keys'
        )
    else:
        return
    raise ConfigError(
        model.path, f"reconciliations[{index}]: {problem}", model.header_line("reconciliations")
    )


def unknown_columns(expression: str, columns: tuple[Column, ...]) -> str | None:
    """Why an expression over the model's rows cannot run: it reads a column the model does
    not declare (found at build, not as the warehouse's binder error at validate)."""
    declared = {c.name.lower() for c in columns}
    unknown = sorted(c for c in columns_read(expression) if c.lower() not in declared)
    if not unknown:
        return None
    names = ", ".join(repr(c) for c in unknown)
    noun = "column" if len(unknown) == 1 else "columns"
    return f"reads {noun} {names}, not in columns ({', '.join(c.name for c in columns)})"


def _reconciliations(
    model: ModelFile,
    reads: set[str],
    sources: dict[str, Source],
    cursor_source: str | None,
    columns: tuple[Column, ...],
) -> tuple[Reconciliation, ...]:
    """Per partition: a time partition's window of a source or upstream model, a cursor
    interval of the cursor source, or a key's rows of a source that names its key column."""
    found: list[Reconciliation] = []
    for index, item in enumerate(model.header.reconciliations):
        line = model.header_line("reconciliations")
        if model.header.grain is Grain.KEY and item.source in reads:
            _check_keyed_source(model, index, item.source, sources)
        if cursor_source is not None and item.source != cursor_source:
            raise ConfigError(
                model.path,
                f"reconciliations[{index}]: a cursor model reconciles each interval with its "
                f"cursor source {cursor_source!r}, not {item.source!r}",
                line,
            )
        if item.source not in reads:
            raise ConfigError(
                model.path,
                f"reconciliations[{index}]: source {item.source!r} is not a table the model reads",
                line,
            )
        for field in ("source_expression", "target_expression"):
            problem = aggregate_problem(getattr(item, field))
            # the source side's columns are known only in the warehouse
            if problem is None and field == "target_expression":
                problem = unknown_columns(item.target_expression, columns)
            if problem is not None:
                raise ConfigError(model.path, f"reconciliations[{index}]: {field} {problem}", line)
        if not IDENTIFIER.match(item.name) or item.name in {r.name for r in found}:
            raise ConfigError(
                model.path, f"reconciliations[{index}]: name {item.name!r} is not unique", line
            )
        found.append(
            Reconciliation(
                item.name,
                item.source,
                item.source_expression,
                item.target_expression,
                format(item.tolerance, "g"),
            )
        )
    return tuple(found)
