"""tidegate.toml: the project's warehouse, state store and sources."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tidegate.domain.errors import ConfigError
from tidegate.domain.model import Source
from tidegate.domain.taint import TaintPolicy
from tidegate.notify.config import Consumer, NotifyTarget, check_references
from tidegate.project import toml_errors

PROJECT_FILE = "tidegate.toml"
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProjectSection(_Strict):
    name: str = Field(min_length=1)


class WarehouseSection(_Strict):
    engine: Literal["duckdb"] = "duckdb"
    path: str = "warehouse.duckdb"


class StateSection(_Strict):
    path: str = ".tidegate/state.db"


class SourceSection(_Strict):
    table: str | None = None
    time_column: str = Field(min_length=1)
    # completeness: a partition whose window holds fewer source rows is skipped, never
    # published (0 turns the check off, e.g. for sources that are legitimately empty some days)
    min_rows: int = Field(default=1, ge=0)


class RerunSection(_Strict):
    # a rerun of more partitions than this needs `--approve "reason"`
    max_partitions: int = Field(default=31, ge=1)
    # rerunning a partition a consumer (a downstream model or a registered consumer) already
    # read needs `--approve "reason"`
    approve_consumed: bool = True


class TaintSection(_Strict):
    # a partition whose upstream input is tainted: skipped (block) or published tainted (warn)
    downstream: TaintPolicy = TaintPolicy.BLOCK


class ProjectFile(_Strict):
    project: ProjectSection
    warehouse: WarehouseSection = WarehouseSection()
    state: StateSection = StateSection()
    sources: dict[str, SourceSection] = {}
    rerun: RerunSection = RerunSection()
    taint: TaintSection = TaintSection()
    notify: tuple[NotifyTarget, ...] = ()
    consumers: tuple[Consumer, ...] = ()

    @model_validator(mode="after")
    def _notify_references(self) -> ProjectFile:
        check_references(self.notify, self.consumers)
        return self


def read_project_file(root: Path) -> ProjectFile:
    path = root / PROJECT_FILE
    if not path.is_file():
        raise ConfigError(str(path), "no tidegate.toml here; run `tidegate init` or pass --project")
    text = path.read_text()
    try:
        data = toml_errors.loads(text)
    except toml_errors.TOMLDecodeError as error:
        raise ConfigError(
            str(path), toml_errors.decode_message(error), toml_errors.decode_line(error)
        ) from None
    try:
        parsed = ProjectFile.model_validate(data)
    except ValidationError as error:
        message, location = toml_errors.describe(error)
        raise ConfigError(str(path), message, toml_errors.line_of_key(text, location)) from None
    for name, source in parsed.sources.items():
        for value in (name, source.table or name, source.time_column):
            if not IDENTIFIER.match(value):
                raise ConfigError(
                    str(path),
                    f"sources.{name}: {value!r} is not a plain identifier",
                    toml_errors.line_of_key(text, ("sources", name)),
                )
    return parsed


def sources_of(parsed: ProjectFile) -> dict[str, Source]:
    return {
        name: Source(
            name=name,
            table=section.table or name,
            time_column=section.time_column,
            min_rows=section.min_rows,
        )
        for name, section in parsed.sources.items()
    }
