"""tidegate.toml: the project's warehouse, state store and sources."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

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
    """The warehouse: an embedded DuckDB file in the project (`path`, the default), or a
    PostgreSQL database (`engine = "postgres"`, `dsn`)."""

    engine: Literal["duckdb", "postgres"] = "duckdb"
    path: str = "warehouse.duckdb"
    # PostgreSQL: postgresql://USER@HOST:PORT/DATABASE, never with a password in it
    dsn: str | None = None
    # PostgreSQL: the schema of published tables, where models read sources and each other
    db_schema: str = Field(default="public", alias="schema", pattern=IDENTIFIER.pattern)
    # the name of an environment variable holding the password: the secret itself never enters
    # the configuration, the ledger or any output (libpq's PGPASSWORD and ~/.pgpass work too)
    password_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")

    @field_validator("dsn")
    @classmethod
    def _dsn(cls, dsn: str | None) -> str | None:
        if dsn is None:
            return dsn
        parts = urlsplit(dsn)
        if parts.scheme not in ("postgresql", "postgres"):
            raise _problem("must be postgresql://USER@HOST:PORT/DATABASE")
        query = {key.lower() for key, _ in parse_qsl(parts.query)}
        if parts.password is not None or "password" in query:
            # the dsn is printed in messages: a password in it would leak
            raise _problem(
                "must not hold a password; name an environment variable in password_env "
                "(or use PGPASSWORD or ~/.pgpass)"
            )
        return dsn

    @field_validator("db_schema")
    @classmethod
    def _schema(cls, schema: str) -> str:
        if schema.lower().startswith(("_tidegate", "pg_")):
            raise _problem(f"{schema!r} is reserved")
        return schema

    @model_validator(mode="after")
    def _engine_fields(self) -> WarehouseSection:
        given = {"schema" if name == "db_schema" else name for name in self.model_fields_set}
        if self.engine == "duckdb":
            extra = sorted({"dsn", "schema", "password_env"} & given)
            if extra:
                raise _problem(f'{extra[0]} is for engine = "postgres"')
            return self
        if "path" in given:
            raise _problem('path is for engine = "duckdb"; PostgreSQL takes dsn')
        if self.dsn is None:
            raise _problem('engine = "postgres" needs dsn = "postgresql://USER@HOST:PORT/DATABASE"')
        return self


def _problem(message: str) -> PydanticCustomError:
    """A problem of a section as a whole, told as it is (pydantic would prefix "Value error")."""
    return PydanticCustomError("section", message)


class StateSection(_Strict):
    """The ledger: a SQLite file in the project (`path`, the default), or a PostgreSQL
    database shared by many machines (`url`)."""

    path: str = ".tidegate/state.db"
    url: str | None = None
    # the PostgreSQL schema that holds the ledger's tables (created on first use)
    db_schema: str = Field(default="tidegate_state", alias="schema", pattern=IDENTIFIER.pattern)
    # the name of an environment variable holding the password: the secret itself never enters
    # the configuration, the ledger or any output (libpq's PGPASSWORD and ~/.pgpass work too)
    password_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")

    @model_validator(mode="after")
    def _postgres_fields(self) -> StateSection:
        if self.url is None:
            extra = sorted({"schema", "password_env"} & self._given())
            if extra:
                raise _problem(f"{extra[0]} is for a PostgreSQL state store (url = ...)")
            return self
        if "path" in self._given():
            raise _problem("path (SQLite) or url (PostgreSQL), not both")
        parts = urlsplit(self.url)
        if parts.scheme not in ("postgresql", "postgres"):
            raise _problem("url: must be postgresql://USER@HOST:PORT/DATABASE")
        query = {key.lower() for key, _ in parse_qsl(parts.query)}
        if parts.password is not None or "password" in query:
            # the url is printed in errors: a password in it would leak
            raise _problem(
                "url: must not hold a password; name an environment variable in "
                "password_env (or use PGPASSWORD or ~/.pgpass)"
            )
        return self

    def _given(self) -> set[str]:
        aliases = {"db_schema": "schema"}
        return {aliases.get(name, name) for name in self.model_fields_set}


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
