"""A cursor model's declaration (`grain = "cursor"`), validated into a CursorSpec: every
problem is a ConfigError naming the file, line and key."""

from __future__ import annotations

from tidegate.domain.cursor import CursorKind, CursorSpec, parse_lag, parse_start
from tidegate.domain.errors import ConfigError
from tidegate.domain.model import Column, Source, WriteMode
from tidegate.domain.partitions import Grain
from tidegate.project.model_file import ModelFile, ProgramHeader
from tidegate.sql.statements import cursor_type_kind

CURSOR_KEYS = (
    "cursor_column",
    "cursor_source",
    "cursor_start",
    "cursor_lag",
    "cursor_batch_rows",
    "cursor_unique",
)


def cursor_keys_only_for_cursor(model: ModelFile) -> None:
    """A time or key grain takes none of the cursor keys."""
    if model.header.grain is Grain.CURSOR:
        return
    for key in CURSOR_KEYS:
        if getattr(model.header, key) is not None:
            raise ConfigError(
                model.path, f'{key}: only for grain = "cursor"', model.header_line(key)
            )


def cursor_column(model: ModelFile) -> str:
    """The partition column of a cursor model: its cursor column, which its rows carry."""
    header = model.header
    if isinstance(header, ProgramHeader):
        raise ConfigError(
            model.path,
            "grain: a cursor model is an SQL model for now (its rows computed by a SELECT)",
            model.header_line("grain"),
        )
    if not header.cursor_column:
        raise ConfigError(
            model.path,
            "grain: a cursor grain needs cursor_column (the source column the cursor measures)",
            model.header_line("grain"),
        )
    model.refuse_declared(
        ("time_column", "key_column", "keys", "start", "schedule"),
        lambda key: (
            "not for a cursor model (it runs past its cursor on every `tidegate run`; "
            f"see {'cursor_start' if key == 'start' else 'cursor_column'})"
        ),
    )
    return header.cursor_column


def cursor_spec(
    model: ModelFile,
    columns: tuple[Column, ...],
    upstream: set[str],
    read_sources: set[str],
    sources: dict[str, Source],
) -> CursorSpec:
    """The cursor of a model whose grain is "cursor", its reads known."""
    header = model.header
    column = cursor_column(model)
    if header.write_mode != WriteMode.APPEND.value:
        raise ConfigError(
            model.path,
            f"write_mode: a cursor model appends what is past its cursor (write_mode = "
            f'"append"), not {header.write_mode}',
            model.header_line("write_mode") or model.header_line("grain"),
        )
    if upstream:
        raise ConfigError(
            model.path,
            f"a cursor model reads sources only for now, not the model {sorted(upstream)[0]!r}",
            model.sql_first_line,
        )
    source = header.cursor_source
    if source is None:
        if len(read_sources) != 1:
            raise ConfigError(
                model.path,
                "cursor_source: required when the model reads "
                + ("no source" if not read_sources else "several sources"),
                model.header_line("grain"),
            )
        source = next(iter(read_sources))
    elif source not in read_sources:
        known = ", ".join(sorted(read_sources)) or "none"
        raise ConfigError(
            model.path,
            f"cursor_source: {source!r} is not a source the model reads ({known})",
            model.header_line("cursor_source"),
        )
    declared = {c.name: c for c in columns}
    if column not in declared:
        raise ConfigError(
            model.path,
            f"cursor_column: {column!r} is not in columns (the rows carry their cursor value)",
            model.header_line("cursor_column"),
        )
    kind_text = cursor_type_kind(declared[column].type)
    if kind_text is None or declared[column].nullable:
        raise ConfigError(
            model.path,
            f"cursor_column: {column!r} must be an integer or a TIMESTAMP, NOT NULL "
            f"(it is {declared[column].declaration()})",
            model.header_line("cursor_column"),
        )
    kind = CursorKind(kind_text)
    return CursorSpec(
        source=source,
        table=sources[source].table,
        column=column,
        kind=kind,
        start=_parsed(model, "cursor_start", kind),
        lag=_parsed(model, "cursor_lag", kind),
        batch_rows=header.cursor_batch_rows,
        unique=bool(header.cursor_unique) or tuple(header.unique_key or ()) == (column,),
    )


def _parsed(model: ModelFile, key: str, kind: CursorKind) -> int | None:
    value = getattr(model.header, key)
    if value is None:
        return None
    try:
        return parse_start(kind, value) if key == "cursor_start" else parse_lag(kind, value)
    except ValueError as error:
        raise ConfigError(model.path, f"{key}: {error}", model.header_line(key)) from None
