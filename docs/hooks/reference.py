"""Reference pages generated from the code at build time, so that they cannot drift from it.

A page asks for a generated part with a marker on a line of its own, `<!-- reference: NAME -->`;
the hook replaces it with Markdown made from the code that NAME names (see GENERATORS)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

from tidegate.cli import INTERRUPTED_EXIT
from tidegate.domain import errors

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
        title = schema.get("title") or schema.get("$id") or name
        description = schema.get("description", "")
        parts.append(f"### `{name}`\n\n{title}. {description}".rstrip(". ") + ".\n")
        fields = schema.get("properties", {})
        if fields:
            parts.append("| Field | Type | Description |\n|---|---|---|")
            required = set(schema.get("required", []))
            for field, spec in fields.items():
                mark = "" if field in required else " (optional)"
                parts.append(
                    f"| `{field}`{mark} | {_json_type(spec)} | {spec.get('description', '')} |"
                )
            parts.append("")
        body = json.dumps(schema, indent=2)
        parts.append(f'??? note "The whole schema"\n\n    ```json\n{_indent(body, 4)}\n    ```\n')
    return "\n".join(parts)


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


GENERATORS: dict[str, Callable[[], str]] = {
    "exit-codes": exit_codes,
    "json-schemas": json_schemas,
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    def generated(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in GENERATORS:
            known = ", ".join(sorted(GENERATORS))
            raise ValueError(f"unknown reference marker {name!r} (known: {known})")
        return GENERATORS[name]()

    return MARKER.sub(generated, markdown)
