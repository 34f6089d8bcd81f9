"""Models declared in a TOML file, `models/NAME.toml`: a command model, a dbt model
(`kind = "dbt"`), a Flink stream job (`kind = "flink"`), or an update model
(`write_mode = "update"`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tidegate.domain.errors import ConfigError
from tidegate.domain.model import Program
from tidegate.project import toml_errors
from tidegate.project.command_model import command_model
from tidegate.project.dbt_model import dbt_model
from tidegate.project.flink_model import flink_model
from tidegate.project.model_file import ModelFile
from tidegate.project.text_files import read_text
from tidegate.project.update_model import update_model


def read_toml_model(root: Path, file: Path) -> tuple[ModelFile, Program | None]:
    path = file.relative_to(root).as_posix()
    text = read_text(file, path)
    try:
        data: dict[str, Any] = toml_errors.loads(text)
    except toml_errors.TOMLDecodeError as error:
        raise ConfigError(
            path, toml_errors.decode_message(error), toml_errors.decode_line(error)
        ) from None
    if data.get("write_mode") == "update":
        return update_model(path, text, data), None
    if data.get("kind") == "dbt":
        return dbt_model(root, path, text, data)
    if data.get("kind") == "flink":
        return flink_model(root, path, text, data)
    return command_model(root, path, text, data)
