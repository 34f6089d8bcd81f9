"""The generated reference can have no blank row: every key of tidegate.toml and of model files
has a description, every option and argument of the CLI has help, and the docs hook's pages name
every one of them."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import click
import pytest
from pydantic import BaseModel

from tidegate.cli import cli, subcommands
from tidegate.project import model_file, toml_errors
from tidegate.project.config import ProjectFile

ROOT = Path(__file__).resolve().parents[2]
HEADERS: tuple[type[model_file.Declaration], ...] = (
    model_file.ModelHeader,
    model_file.PythonHeader,
    model_file.CommandHeader,
    model_file.DbtHeader,
    model_file.UpdateHeader,
)


def _hook() -> ModuleType:
    path = ROOT / "docs" / "hooks" / "reference.py"
    spec = importlib.util.spec_from_file_location("docs_reference_hook", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


HOOK = _hook()


def _models(annotation: Any) -> Iterator[type[BaseModel]]:
    """The pydantic models an annotation holds, however nested (lists, unions, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        for field in annotation.model_fields.values():
            yield from _models(field.annotation)
        return
    for arg in typing.get_args(annotation):
        yield from _models(arg)


def _documented_models() -> list[type[BaseModel]]:
    found = [*_models(ProjectFile)]
    for header in HEADERS:
        found += _models(header)
    return list(dict.fromkeys(found))


def _key(model: type[BaseModel], name: str) -> str:
    return model.model_fields[name].alias or name


def test_every_configuration_and_model_file_key_has_a_description() -> None:
    models = _documented_models()
    names = {model.__name__ for model in models}
    # the walk reaches every section and table, every kind of check and the reconciliations
    assert {"WarehouseSection", "NotifyTarget", "Consumer", "QueryCheck"} <= names
    assert "ReconciliationDecl" in names
    blank = [
        f"{model.__name__}.{name}"
        for model in models
        for name, field in model.model_fields.items()
        if not (field.description or "").strip()
    ]
    assert blank == [], f"fields without Field(description=...): {blank}"


def _params(command: click.Command, path: str) -> Iterator[tuple[str, click.Parameter]]:
    for param in command.params:
        yield path, param
    if isinstance(command, click.Group):
        for name, sub in subcommands(command).items():
            # a hidden subcommand is its group's main form (`backfill MODEL`): documented there
            yield from _params(sub, path if sub.hidden else f"{path} {name}")


def test_every_cli_option_and_argument_has_help() -> None:
    blank = [
        f"{path}: {param.name}"
        for path, param in _params(cli, "tidegate")
        if not (getattr(param, "help", None) or "").strip()
    ]
    assert blank == [], f"options and arguments without help: {blank}"


def test_the_configuration_page_names_every_key() -> None:
    markdown = HOOK.project_file()
    for section in _models(ProjectFile):
        for name in section.model_fields:
            assert f"| `{_key(section, name)}` |" in markdown, f"{section.__name__}.{name}"
    for name in ("warehouse", "state", "sources.NAME", "[notify]", "[consumers]"):
        assert f"`[{name}]`" in markdown
    # the aliases, as written in TOML, not the attribute names
    assert "`schema`" in markdown and "db_schema" not in markdown


def test_the_model_file_page_names_every_key() -> None:
    headers = HOOK.model_header()
    for header in HEADERS:
        for name in header.model_fields:
            assert f"| `{_key(header, name)}` |" in headers, f"{header.__name__}.{name}"
    assert "| `set` |" in headers and "assignments" not in headers
    checks = HOOK.checks()
    union = typing.get_args(model_file.CheckDecl)[0]
    for check in typing.get_args(union):
        kind = typing.get_args(check.model_fields["type"].annotation)[0]
        assert f"### `{kind}`" in checks
        for name in check.model_fields:
            assert f"| `{name}` |" in checks, f"{check.__name__}.{name}"
    reconciliations = HOOK.reconciliations()
    for name in model_file.ReconciliationDecl.model_fields:
        assert f"| `{name}` |" in reconciliations


def test_the_cli_page_shows_every_command_and_option() -> None:
    markdown = HOOK.cli_reference()
    assert "Sentinel" not in markdown and "UNSET" not in markdown
    for path, param in _params(cli, "tidegate"):
        section = markdown.split(f"`{path}` {{ #{path.replace(' ', '-')} }}", 1)[-1]
        section = re.split(r"\n##+ `", section, maxsplit=1)[0]
        if isinstance(param, click.Option):
            assert f"`{param.opts[-1]}`" in section, f"{path}: {param.opts}"
        else:
            assert f"`{param.make_metavar(click.Context(cli))}`" in section, f"{path}: {param}"
    # the main form's usage, options and arguments
    assert "tidegate backfill MODEL --partitions START..END [OPTIONS]" in markdown
    assert "| `--batch-size` |" in markdown


@pytest.mark.parametrize("page", ["configuration.md", "model-files.md"])
def test_the_reference_pages_examples_are_valid(page: str) -> None:
    text = (ROOT / "docs" / "reference" / page).read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, re.DOTALL)
    assert blocks
    if page == "configuration.md":
        ProjectFile.model_validate(toml_errors.loads("\n".join(blocks)))
        return
    sql = re.search(r"```sql\n/\* tidegate\n(.*?)\*/", text, re.DOTALL)
    assert sql is not None
    model_file.ModelHeader.model_validate(toml_errors.loads(sql.group(1)))
    model_file.CommandHeader.model_validate(toml_errors.loads(blocks[0]))
    for block in blocks[1:]:
        declared = toml_errors.loads(block)
        for check in declared.get("checks", []):
            model_file.ModelHeader.model_validate(
                {"grain": "day", "columns": {"x": "INT"}, "checks": [check]}
            )
        for reconciliation in declared.get("reconciliations", []):
            model_file.ReconciliationDecl.model_validate(reconciliation)


def test_every_json_document_field_has_a_description() -> None:
    blank = []
    for path in sorted((ROOT / "src" / "tidegate" / "schemas").glob("*.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        for name, spec in schema.get("properties", {}).items():
            if name != "schema" and not spec.get("description", "").strip():
                blank.append(f"{path.name}: {name}")
    assert blank == [], f"top-level fields without a description: {blank}"
