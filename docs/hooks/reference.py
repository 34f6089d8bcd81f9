"""Reference pages generated from the code at build time, so that they cannot drift from it.

A page asks for a generated part with a marker on a line of its own, `<!-- reference: NAME -->`;
the hook replaces it with Markdown made from the code that NAME names (see GENERATORS)."""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from tidegate.cli import INTERRUPTED_EXIT, cli
from tidegate.cli_backfill import BackfillGroup
from tidegate.domain import errors
from tidegate.project import model_file
from tidegate.project.config import ProjectFile
from tidegate.project.update_model import NOT_FOR_UPDATES, UPDATE_CHECKS

MARKER = re.compile(r"^<!-- reference: (?P<name>[a-z-]+) -->$", re.MULTILINE)


def exit_codes() -> str:
    """The exit codes, from the error classes the CLI maps them from."""
    rows = [(0, "Success", "The command did what was asked (or there was nothing to do).")]
    for error in (
        errors.OperationFailed,
        errors.UsageError,
        errors.RefusedError,
        errors.BusyError,
        errors.StoppedError,
    ):
        rows.append((error.exit_code, error.__name__, _first_paragraph(error.__doc__)))
    rows.append(
        (
            INTERRUPTED_EXIT,
            "Interrupted",
            "Ctrl-C (SIGINT) ended the command; a backfill can be resumed.",
        )
    )
    lines = ["| Code | Meaning | When |", "|---|---|---|"]
    lines += [f"| `{code}` | {name} | {text} |" for code, name, text in rows]
    return "\n".join(lines)


def json_schemas() -> str:
    """Every `--json` document's JSON Schema, as shipped in the package."""
    folder = resources.files("tidegate") / "schemas"
    parts = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if not entry.name.endswith(".json"):
            continue
        schema: dict[str, Any] = json.loads(entry.read_text(encoding="utf-8"))
        name = entry.name.removesuffix(".json")
        parts.append(f"### `{name}` {{ #{name.replace('.', '-')} }}\n")
        title = schema.get("title")
        if title:
            parts.append(f"`{title}`\n")
        if schema.get("description"):
            parts.append(f"{schema['description']}\n")
        parts.append(_json_fields(schema))
        for option in schema.get("oneOf") or schema.get("anyOf") or []:
            ref = str(option.get("$ref", ""))
            if not ref.startswith("#/$defs/"):
                continue
            variant: dict[str, Any] = schema["$defs"][ref.removeprefix("#/$defs/")]
            tag = variant.get("properties", {}).get("event", {}).get("const")
            label = f"`event` = `{json.dumps(tag)}`" if tag else f"`{ref.rsplit('/', 1)[-1]}`"
            parts.append(f"**{label}**\n")
            if variant.get("description"):
                parts.append(f"{variant['description']}\n")
            parts.append(_json_fields(variant))
        body = json.dumps(schema, indent=2, ensure_ascii=False)
        parts.append(f'??? note "The whole schema"\n\n    ```json\n{_indent(body, 4)}\n    ```\n')
    return "\n".join(parts)


def _json_fields(schema: dict[str, Any]) -> str:
    """The table of an object schema's top-level fields (empty for any other schema)."""
    fields: dict[str, Any] = schema.get("properties", {})
    if not fields:
        return ""
    rows = ["| Field | Type | Description |", "|---|---|---|"]
    required = set(schema.get("required", []))
    for field, spec in fields.items():
        mark = "" if field in required else " (optional)"
        text = spec.get("description", "")
        if not text and field == "schema" and "const" in spec:
            text = "The document's schema, and its version."
        rows.append(f"| `{field}`{mark} | {_json_type(spec)} | {_cell(text)} |")
    return "\n".join(rows) + "\n"


def _json_type(spec: dict[str, Any]) -> str:
    if "const" in spec:
        return f"`{json.dumps(spec['const'])}`"
    if "enum" in spec:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in spec["enum"])
    kind = spec.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind:
        return str(kind)
    if "$ref" in spec:
        return f"see `{spec['$ref'].rsplit('/', 1)[-1]}`"
    options: list[dict[str, Any]] = spec.get("oneOf") or spec.get("anyOf") or []
    if options:
        return " or ".join(_json_type(option) for option in options)
    return "any"


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line else line for line in text.splitlines())


def _first_paragraph(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n")[0].split())


# --- tidegate.toml and model files, from their pydantic models ---------------------------------


def project_file() -> str:
    """Every section and table of tidegate.toml, each with its keys, from ProjectFile."""
    parts = ["## Sections { #sections }\n", _fields_table(ProjectFile)]
    for name, field in ProjectFile.model_fields.items():
        section, heading = _section(name, field.annotation)
        parts.append(f"## `{heading}` {{ #{name} }}\n")
        parts.append(_docstring(section))
        parts.append(_fields_table(section))
    return "\n".join(parts)


def _section(name: str, annotation: Any) -> tuple[type[BaseModel], str]:
    """The model of a tidegate.toml section and how its table is written."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict:
        return args[1], f"[{name}.NAME]"
    if origin is tuple:
        return args[0], f"[[{name}]]"
    optional = [arg for arg in args if arg is not type(None)]
    if len(optional) == 1:  # an optional section: `X | None`
        return optional[0], f"[{name}]"
    return annotation, f"[{name}]"


def model_header() -> str:
    """The declaration keys every model takes, then the keys each kind of model adds."""
    kinds: list[tuple[str, str, type[model_file.Declaration]]] = [
        ("sql", "SQL models (`models/NAME.sql`)", model_file.ModelHeader),
        ("python", "Python models (`@tidegate.model(...)`)", model_file.PythonHeader),
        ("command", "Command models (`models/NAME.toml`)", model_file.CommandHeader),
        ("dbt", 'dbt models (`models/NAME.toml`, `kind = "dbt"`)', model_file.DbtHeader),
        ("flink", 'Flink models (`models/NAME.toml`, `kind = "flink"`)', model_file.FlinkHeader),
        (
            "update",
            'Update models (`models/NAME.toml`, `write_mode = "update"`)',
            model_file.UpdateHeader,
        ),
    ]
    shared = model_file.Declaration.model_fields
    parts = ["## Keys of every model { #declaration }\n", _docstring(model_file.Declaration)]
    parts.append(_fields_table(model_file.Declaration))
    for anchor, title, kind in kinds:
        own = [
            name
            for name, field in kind.model_fields.items()
            if name not in shared or repr(field) != repr(shared[name])
        ]
        parts.append(f"## {title} {{ #{anchor} }}\n")
        parts.append(_docstring(kind))
        if kind is model_file.UpdateHeader:
            refused = ", ".join(f"`{key}`" for key in NOT_FOR_UPDATES)
            allowed = " and ".join(f"`{check}`" for check in UPDATE_CHECKS)
            parts.append(
                f'An update model takes `grain = "range"` and `key_column` (an integer key). '
                f"It refuses {refused}, and its checks are {allowed} checks, judged on each "
                "range's rows.\n"
            )
        parts.append("Besides the keys of every model:\n")
        parts.append(_fields_table(kind, own))
        if kind is model_file.FlinkHeader:
            parts.append("The `[output]` table:\n")
            parts.append(_fields_table(model_file.FlinkOutputDecl))
    return "\n".join(parts)


def checks() -> str:
    """The keys every `[[checks]]` table takes, then each check type's own keys."""
    union = typing.get_args(model_file.CheckDecl)[0]
    kinds: list[type[BaseModel]] = list(typing.get_args(union))
    shared = ["type", *model_file._Check.model_fields]
    parts = [
        "### Keys of every check { #check-keys }\n",
        _fields_table(kinds[0], shared, {"type": _check_types(kinds)}),
    ]
    for kind in kinds:
        name = _literal_of(kind.model_fields["type"].annotation)
        parts.append(f"### `{name}` {{ #check-{name.replace('_', '-')} }}\n")
        parts.append(_docstring(kind))
        own = [key for key in kind.model_fields if key not in shared]
        parts.append(_fields_table(kind, own))
    return "\n".join(parts)


def reconciliations() -> str:
    """The keys of a `[[reconciliations]]` table."""
    return _fields_table(model_file.ReconciliationDecl)


def _check_types(kinds: list[type[BaseModel]]) -> FieldInfo:
    names = ", ".join(f"`{_literal_of(k.model_fields['type'].annotation)}`" for k in kinds)
    return FieldInfo(annotation=str, description=f"The check's type: one of {names}.")


def _literal_of(annotation: Any) -> str:
    return str(typing.get_args(annotation)[0])


def _fields_table(
    model: type[BaseModel],
    names: list[str] | None = None,
    replaced: dict[str, FieldInfo] | None = None,
) -> str:
    rows = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for name in model.model_fields if names is None else names:
        field = (replaced or {}).get(name) or model.model_fields[name]
        key = field.alias or name
        rows.append(
            f"| `{key}` | {_toml_type(field.annotation)} | {_toml_default(field)} "
            f"| {_cell(field.description or '')} |"
        )
    return "\n".join(rows) + "\n"


def _toml_type(annotation: Any) -> str:
    return " or ".join(_type_names(annotation)) or "any"


def _type_names(annotation: Any) -> list[str]:
    """How a value of the annotation is written in TOML, one name per alternative."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_names(args[0])
    if origin in (typing.Union, types.UnionType):
        return [name for arg in args if arg is not type(None) for name in _type_names(arg)]
    if origin is typing.Literal:
        return [_values(list(args))]
    if origin in (list, tuple):
        inner = _type_names(args[0])
        if inner and inner[0].startswith("`"):
            return [f"array of {_join(inner)}"]
        return [f"array of {_join([_plural(name) for name in inner])}"]
    if origin is dict:
        return [f"table of {_join([_plural(name) for name in _type_names(args[1])])}"]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [_values([member.value for member in annotation])]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return ["table"]
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    return [simple.get(annotation, getattr(annotation, "__name__", str(annotation)))]


def _values(values: list[Any]) -> str:
    return _join([f"`{json.dumps(value)}`" for value in values])


def _join(names: list[str]) -> str:
    unique = list(dict.fromkeys(names))
    return unique[0] if len(unique) == 1 else ", ".join(unique[:-1]) + " or " + unique[-1]


def _plural(name: str) -> str:
    return name if name.startswith("`") else name + "s"


def _toml_default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "none"
    if isinstance(value, BaseModel):
        return "each key's default"
    return f"`{_toml_value(value)}`"


def _toml_value(value: Any) -> str:
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{}" if not value else json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


def _docstring(thing: Any) -> str:
    """A class's own docstring (not one it inherits) as Markdown paragraphs."""
    own = thing.__dict__.get("__doc__")
    return _paragraphs(inspect.cleandoc(own)) + "\n" if own else ""


# --- the command line, from the click app ---------------------------------------------------------


def cli_reference() -> str:
    """Every command and subcommand of `tidegate`: its usage, arguments and options."""
    root = click.Context(cli, info_name="tidegate", **cli.context_settings)
    parts = [_command_doc(cli, root, 2, summary=True)]
    for command, ctx, level in _commands(cli, root, 2):
        parts.append(_command_doc(command, ctx, level))
    return "\n".join(parts)


def _commands(
    group: click.Command, parent: click.Context, level: int
) -> Iterator[tuple[click.Command, click.Context, int]]:
    if not isinstance(group, click.Group):
        return
    for name, command in _subcommands(group, parent):
        ctx = click.Context(command, info_name=name, parent=parent, **command.context_settings)
        yield command, ctx, level
        yield from _commands(command, ctx, level + 1)


def _subcommands(group: click.Group, ctx: click.Context) -> Iterator[tuple[str, click.Command]]:
    """A group's commands that its help lists (the hidden ones left out)."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            yield name, command


def _command_doc(
    command: click.Command, ctx: click.Context, level: int, summary: bool = False
) -> str:
    path = ctx.command_path
    anchor = path.replace(" ", "-")
    parts = [] if summary else [f"{'#' * level} `{path}` {{ #{anchor} }}\n"]
    parts.append(_paragraphs(inspect.cleandoc(command.help or "")) + "\n")
    usage = command.get_usage(ctx).strip()
    parts.append(f"```text\n{usage}\n```\n")
    shown = command.main_form if isinstance(command, BackfillGroup) else command
    params = shown.get_params(ctx)
    arguments = [p for p in params if isinstance(p, click.Argument)]
    options = [p for p in params if isinstance(p, click.Option) and not p.hidden]
    if arguments:
        parts.append("| Argument | Description |\n|---|---|")
        for argument in arguments:
            note = "" if argument.required else " Optional."
            text = _cell((getattr(argument, "help", None) or "") + note)
            parts.append(f"| `{argument.make_metavar(ctx)}` | {text} |")
        parts.append("")
    if options:
        parts.append("| Option | Type | Default | Description |\n|---|---|---|---|")
        for option in options:
            names = ", ".join(f"`{name}`" for name in [*option.opts, *option.secondary_opts])
            parts.append(
                f"| {names} | {_option_type(option)} | {_option_default(option)} "
                f"| {_cell(option.help or '')} |"
            )
        parts.append("")
    if isinstance(command, click.Group):
        rows = [
            f"| [`{name}`](#{path.replace(' ', '-')}-{name}) | "
            f"{_cell(sub.get_short_help_str(200))} |"
            for name, sub in _subcommands(command, ctx)
        ]
        parts.append("| Command | What it does |\n|---|---|\n" + "\n".join(rows) + "\n")
    return "\n".join(parts)


def _option_type(option: click.Option) -> str:
    if option.is_flag:
        return "flag"
    kind = option.type
    if isinstance(kind, click.Choice):
        text = _join([f"`{choice}`" for choice in kind.choices])
    elif isinstance(kind, (click.IntRange, click.FloatRange)):
        text = _number_range(kind)
    else:
        text = {"float": "number"}.get(kind.name, kind.name)
    return text + (", repeatable" if option.multiple else "")


def _number_range(kind: click.IntRange | click.FloatRange) -> str:
    name = "integer" if isinstance(kind, click.IntRange) else "number"
    if kind.min is not None and kind.max is not None:
        return f"{name}, {kind.min} to {kind.max}"
    if kind.min is not None:
        return f"{name}, {'above' if kind.min_open else 'at least'} {kind.min}"
    if kind.max is not None:
        return f"{name}, {'below' if kind.max_open else 'at most'} {kind.max}"
    return name


def _option_default(option: click.Option) -> str:
    if option.required:
        return "required"
    value = option.default
    if option.is_flag:
        return "on" if value is True else "off"
    if value is None or value == () or type(value).__name__ == "Sentinel" or callable(value):
        return "none"
    return f"`{value}`"


def _paragraphs(text: str) -> str:
    """Docstring text as Markdown paragraphs (the lines of each paragraph joined)."""
    return "\n\n".join(" ".join(p.split()) for p in text.strip().split("\n\n") if p.strip())


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


GENERATORS: dict[str, Callable[[], str]] = {
    "exit-codes": exit_codes,
    "json-schemas": json_schemas,
    "project-file": project_file,
    "model-header": model_header,
    "checks": checks,
    "reconciliations": reconciliations,
    "cli": cli_reference,
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    def generated(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in GENERATORS:
            known = ", ".join(sorted(GENERATORS))
            raise ValueError(f"unknown reference marker {name!r} (known: {known})")
        return GENERATORS[name]()

    return MARKER.sub(generated, markdown)
