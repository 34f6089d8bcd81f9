"""tidegate.toml: the project's warehouse, state store and sources."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal
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

from tidegate.domain.checks import duration_seconds
from tidegate.domain.errors import ConfigError
from tidegate.domain.model import Source, SourceFiles
from tidegate.domain.taint import TaintPolicy
from tidegate.notify.config import Consumer, NotifyTarget, check_references
from tidegate.project import toml_errors
from tidegate.project.layout import PROJECT_FILE
from tidegate.project.text_files import check_project_file_size, read_text

# libpq reads the password from it when no password_env is named: a secret in any project
PGPASSWORD = "PGPASSWORD"
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProjectSection(_Strict):
    """The project itself."""

    name: str = Field(
        min_length=1, description="The project's name, shown by `status`, the report and the UI."
    )


# the keys each warehouse engine takes, besides `engine`
ENGINE_KEYS = {
    "duckdb": frozenset({"path"}),
    "postgres": frozenset({"dsn", "schema", "password_env"}),
    "spark": frozenset({"master", "remote", "location", "catalog", "conf", "password_env"}),
}
# tables = "iceberg": the keys it adds to a DuckDB warehouse
ICEBERG_KEYS = frozenset({"tables", "location", "catalog", "namespace", "password_env", "keep"})
SQLITE_CATALOG = "sqlite"
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class WarehouseSection(_Strict):
    """The warehouse: an embedded DuckDB file in the project (`path`, the default), a
    PostgreSQL database (`engine = "postgres"`, `dsn`), or Iceberg tables computed by Spark
    (`engine = "spark"`, `location`, `master` or `remote`, `catalog`)."""

    engine: Literal["duckdb", "postgres", "spark"] = Field(
        default="duckdb",
        description="Where models run and publish: the embedded DuckDB file, a PostgreSQL "
        "database or Spark. The other keys of the section depend on it.",
    )
    path: str = Field(
        default="warehouse.duckdb",
        description="DuckDB: the warehouse file, relative to the project.",
    )
    dsn: str | None = Field(
        default=None,
        description="PostgreSQL (required): the database, `postgresql://USER@HOST:PORT/DATABASE`. "
        "A password in it (`user:secret@`, `?password=`) is refused: use `password_env`.",
    )
    db_schema: str = Field(
        default="public",
        alias="schema",
        pattern=IDENTIFIER.pattern,
        description="PostgreSQL: the schema of published tables, where models' unqualified names "
        "(sources, other models) are looked up. Names starting with `_tidegate` or `pg_` are "
        "reserved.",
    )
    password_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="PostgreSQL, or Spark with a PostgreSQL `catalog`: the name of an environment "
        "variable holding the password. The secret itself never enters the configuration, the "
        "ledger, any output or a model's job; libpq's `PGPASSWORD` and `~/.pgpass` work too.",
    )
    master: str = Field(
        default="local[2]",
        min_length=1,
        description="Spark: the master URL (`local[2]`, `spark://HOST:PORT`, `yarn`, `k8s://…`). "
        "Not with `remote`.",
    )
    remote: str | None = Field(
        default=None,
        description="Spark: a Spark Connect server, `sc://HOST:PORT`, used instead of `master`.",
    )
    location: str = Field(
        default="warehouse",
        min_length=1,
        description='Iceberg tables (Spark\'s, or `tables = "iceberg"`): the folder of the '
        "tables' data and metadata files, relative to the project or absolute (default `lake`). "
        "Spark reads its Parquet sources from folders in it.",
    )
    catalog: str | None = Field(
        default=None,
        description='Iceberg tables (Spark\'s, or `tables = "iceberg"`): the SQL catalog of the '
        'tables, `"sqlite"` (the default: `<location>/catalog.db`) or '
        "`postgresql://USER@HOST:PORT/DB`, which machines share (Spark's workers keep their "
        "leases' fences there too).",
    )
    tables: Literal["engine", "iceberg"] = Field(
        default="engine",
        description='What published tables are: the engine\'s own (`"engine"`), or Apache '
        'Iceberg tables (`"iceberg"`; needs `tidegate[iceberg]`) in a catalog every Iceberg '
        "reader opens, written through branches (write–audit–publish). Spark publishes Iceberg "
        "tables only (its default).",
    )
    namespace: str = Field(
        default="default",
        pattern=IDENTIFIER.pattern,
        description="Iceberg: the namespace of published tables (a model with a `schema` publishes "
        "into `NAMESPACE.SCHEMA`).",
    )
    keep: str = Field(
        default="30d",
        description="Iceberg: how long `tidegate maintain` keeps snapshots and unreferenced files "
        '(`"30d"`, `"12h"`, `"90m"`): it expires older snapshots whose partitions were published '
        "again since, and removes the files no snapshot kept references. A partition's current "
        "snapshot is always kept.",
    )
    conf: dict[str, str | int | float | bool] = Field(
        default={},
        description='Spark: more settings of the session (`{ "spark.executor.memory" = "4g" }`). '
        "tidegate sets the time zone to UTC and ANSI mode on.",
    )

    @field_validator("dsn", "catalog")
    @classmethod
    def _dsn(cls, dsn: str | None) -> str | None:
        if dsn is None or dsn == SQLITE_CATALOG:
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

    @field_validator("keep")
    @classmethod
    def _keep(cls, keep: str) -> str:
        try:
            duration_seconds(keep)
        except ValueError:
            raise _problem(f"keep {keep!r} is not a duration such as 30d, 12h or 90m") from None
        return keep.strip()

    @field_validator("remote")
    @classmethod
    def _remote(cls, remote: str | None) -> str | None:
        if remote is not None and not remote.startswith("sc://"):
            raise _problem("must be a Spark Connect URL, sc://HOST:PORT")
        return remote

    @field_validator("db_schema")
    @classmethod
    def _schema(cls, schema: str) -> str:
        if schema.lower().startswith(("_tidegate", "pg_")):
            raise _problem(f"{schema!r} is reserved")
        return schema

    @model_validator(mode="before")
    @classmethod
    def _spark_tables(cls, given: Any) -> Any:
        """Spark publishes Iceberg tables: `tables` says so unless given (and refused if given
        otherwise, below)."""
        if isinstance(given, dict) and given.get("engine") == "spark" and "tables" not in given:
            return {**given, "tables": "iceberg"}
        return given

    @model_validator(mode="after")
    def _engine_fields(self) -> WarehouseSection:
        given = {"schema" if name == "db_schema" else name for name in self.model_fields_set}
        given.discard("engine")
        if self.tables == "iceberg":
            self._iceberg_fields(given)
            return self
        if self.engine == "spark":
            # Spark's own format of Parquet folders and pointers is retired
            raise _problem(
                'engine = "spark" publishes Iceberg tables: tables = "iceberg" (the default), '
                'not "engine"'
            )
        extra = sorted(given - ENGINE_KEYS[self.engine])
        for key in ("namespace", "keep"):
            if key in extra:
                raise _problem(f'{key} is for tables = "iceberg"')
        if self.catalog == SQLITE_CATALOG:
            raise _problem('catalog = "sqlite" is for tables = "iceberg"')
        if extra:
            owner = next(e for e, keys in ENGINE_KEYS.items() if extra[0] in keys)
            raise _problem(f'{extra[0]} is for engine = "{owner}", not "{self.engine}"')
        if self.engine == "postgres" and self.dsn is None:
            raise _problem('engine = "postgres" needs dsn = "postgresql://USER@HOST:PORT/DATABASE"')
        return self

    def _iceberg_fields(self, given: set[str]) -> None:
        if self.engine == "postgres":
            raise _problem(
                'tables = "iceberg" is for engine = "duckdb" or "spark" (PostgreSQL publishes '
                "into tables of its own)"
            )
        extra = sorted(given - ENGINE_KEYS[self.engine] - ICEBERG_KEYS)
        if extra:
            raise _problem(
                f'{extra[0]} is not a key of engine = "{self.engine}" with tables = "iceberg"'
            )
        if _URI.match(self.location) and not self.location.startswith("file://"):
            raise _problem(
                "location must be a folder (a path, or file://…): tidegate reads the tables' files"
            )
        if "master" in given and self.remote is not None:
            raise _problem("master or remote (Spark Connect), not both")
        if self.password_env is not None and self.catalog in (None, SQLITE_CATALOG):
            raise _problem("password_env is for a catalog in PostgreSQL (catalog = ...)")

    @property
    def iceberg_location(self) -> str:
        """Iceberg: the folder of the tables' files, as given (default `lake`)."""
        return self.location if "location" in self.model_fields_set else "lake"

    @property
    def keep_seconds(self) -> int:
        """Iceberg: `keep` in seconds."""
        return duration_seconds(self.keep)


def _problem(message: str) -> PydanticCustomError:
    """A problem of a section as a whole, told as it is (pydantic would prefix "Value error")."""
    return PydanticCustomError("section", message)


class StateSection(_Strict):
    """The ledger: a SQLite file in the project (`path`, the default), or a PostgreSQL
    database shared by many machines (`url`)."""

    path: str = Field(
        default=".tidegate/state.db",
        description="The SQLite ledger file (WAL mode), relative to the project. Not with `url`.",
    )
    url: str | None = Field(
        default=None,
        description="A PostgreSQL ledger shared by many machines, "
        "`postgresql://USER@HOST:PORT/DATABASE` (needs `tidegate[postgres]`). A password in it "
        "is refused: use `password_env`.",
    )
    db_schema: str = Field(
        default="tidegate_state",
        alias="schema",
        pattern=IDENTIFIER.pattern,
        description="With `url`: the PostgreSQL schema that holds the ledger's tables (created "
        "on first use).",
    )
    password_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="With `url`: the name of an environment variable holding the password. The "
        "secret itself never enters the configuration, the ledger, any output or a model's job; "
        "libpq's `PGPASSWORD` and `~/.pgpass` work too.",
    )

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


FILE_FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}


class SourceSection(_Strict):
    """A table of the warehouse (`table`, default the source's name), files that tidegate
    reads through a view of that name (`path`: a file or a glob, relative to the project), or
    an Iceberg table of the warehouse's catalog read through such a view (`iceberg`)."""

    table: str | None = Field(
        default=None,
        description="The warehouse table the source is (default: the source's name). Not with "
        "`path`.",
    )
    path: str | None = Field(
        default=None,
        min_length=1,
        description="Files instead of a table (DuckDB warehouse only): a file or a glob, relative "
        "to the project, read through a view named like the source.",
    )
    iceberg: str | None = Field(
        default=None,
        min_length=1,
        description='An Apache Iceberg table instead (`"NAMESPACE.TABLE"`, with `[warehouse] '
        'tables = "iceberg"`): a table of the warehouse\'s Iceberg catalog, read through a view '
        "named like the source over the files of its current snapshot. Not with `table` or "
        "`path`.",
    )
    format: Literal["parquet", "csv", "json"] | None = Field(
        default=None,
        description="The files' format, when `path` does not end in `.parquet`, `.pq`, `.csv`, "
        "`.tsv`, `.json`, `.jsonl` or `.ndjson` (optionally followed by `.gz` or `.zst`).",
    )
    time_column: str = Field(
        min_length=1,
        description="The column that places a row in time: which rows a partition's window covers.",
    )
    min_rows: int = Field(
        default=1,
        ge=0,
        description="Completeness: a partition whose window holds fewer source rows is skipped, "
        "never published (0 turns the check off, for a source legitimately empty some days).",
    )

    @model_validator(mode="after")
    def _files(self) -> SourceSection:
        if self.iceberg is not None:
            if self.table is not None or self.path is not None:
                other = "table" if self.table is not None else "path"
                raise _problem(f"iceberg (an Iceberg table) or {other}, not both")
            if self.format is not None:
                raise _problem("format is for a file source (path = ...)")
            parts = self.iceberg.split(".")
            if len(parts) < 2 or not all(IDENTIFIER.match(part) for part in parts):
                raise _problem(
                    f"iceberg: {self.iceberg!r} is not NAMESPACE.TABLE of plain identifiers"
                )
            return self
        if self.path is None:
            if self.format is not None:
                raise _problem("format is for a file source (path = ...)")
            return self
        if self.table is not None:
            raise _problem("table (a warehouse table) or path (files), not both")
        if "'" in self.path or "\n" in self.path:
            raise _problem("path: quotes and line breaks are not allowed")
        if self.format is None and file_format(self.path) is None:
            known = ", ".join(sorted(FILE_FORMATS))
            raise _problem(f"path: cannot tell the files' format (ends in {known}); set format")
        return self


def file_format(path: str) -> str | None:
    name = path.lower().removesuffix(".gz").removesuffix(".zst")
    return next((f for suffix, f in FILE_FORMATS.items() if name.endswith(suffix)), None)


class RerunSection(_Strict):
    """What a rerun may do without `--approve "reason"`."""

    max_partitions: int = Field(
        default=31,
        ge=1,
        description='A rerun of more partitions than this needs `--approve "reason"`.',
    )
    approve_consumed: bool = Field(
        default=True,
        description="Whether rerunning a partition that a consumer (a downstream model or a "
        'registered consumer) already read needs `--approve "reason"`.',
    )


class TaintSection(_Strict):
    """What a run does with a partition whose upstream input is tainted."""

    downstream: TaintPolicy = Field(
        default=TaintPolicy.BLOCK,
        description="A partition whose upstream input is tainted: skipped (`block`), or published "
        "and tainted too (`warn`).",
    )


class LimitsSection(_Strict):
    """Bounds on what tidegate reads."""

    model_file_bytes: int = Field(
        default=1_000_000,
        ge=1,
        strict=True,
        description="A model file larger than this many bytes is refused before it is parsed (a "
        "megabyte of SQL takes seconds and hundreds of megabytes to parse, on every command).",
    )


class DbtSection(_Strict):
    """A dbt project tidegate controls as it is: every model of it becomes a tidegate model,
    compiled by dbt, run, audited and published by tidegate."""

    project: str = Field(
        min_length=1,
        description="The dbt project's folder (holding `dbt_project.yml`), relative to this "
        "project. tidegate writes nothing into it: dbt's artifacts go under `.tidegate/dbt/`.",
    )
    profiles_dir: str | None = Field(
        default=None,
        min_length=1,
        description="The folder holding `profiles.yml`, relative to this project (default: "
        "dbt's own choice: `DBT_PROFILES_DIR`, the project folder, then `~/.dbt`).",
    )
    target: str | None = Field(
        default=None,
        min_length=1,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="The profile's target to compile for (default: the profile's own). Its "
        "database and schema must be the warehouse's: tidegate publishes into the relations "
        "dbt would build.",
    )


class ProjectFile(_Strict):
    """tidegate.toml as a whole: its sections and tables."""

    project: ProjectSection = Field(description="The project: its name.")
    warehouse: WarehouseSection = Field(
        default=WarehouseSection(),
        description="Where models run and publish (default: the DuckDB file `warehouse.duckdb`).",
    )
    state: StateSection = Field(
        default=StateSection(),
        description="The ledger (default: the SQLite file `.tidegate/state.db`).",
    )
    sources: dict[str, SourceSection] = Field(
        default={},
        description="The external tables (or files) models read, one `[sources.NAME]` table "
        "each; tidegate never writes them.",
    )
    dbt: DbtSection | None = Field(
        default=None,
        description='A dbt project whose models tidegate controls (`[dbt] project = "FOLDER"`).',
    )
    rerun: RerunSection = Field(
        default=RerunSection(), description="What a rerun may do without approval."
    )
    taint: TaintSection = Field(
        default=TaintSection(), description="How runs treat tainted upstream input."
    )
    limits: LimitsSection = Field(
        default=LimitsSection(), description="Bounds on what tidegate reads."
    )
    notify: tuple[NotifyTarget, ...] = Field(
        default=(),
        description="Notification targets, one `[[notify]]` table each: HTTP endpoints or files "
        "that receive notices and OpenLineage events.",
    )
    consumers: tuple[Consumer, ...] = Field(
        default=(),
        description="External readers of a model, one `[[consumers]]` table each: told of "
        "publishes, taints and re-reads; what they read counts as consumed for reruns.",
    )

    @model_validator(mode="after")
    def _notify_references(self) -> ProjectFile:
        check_references(self.notify, self.consumers)
        return self

    @model_validator(mode="after")
    def _file_sources(self) -> ProjectFile:
        files = [name for name, source in self.sources.items() if source.path is not None]
        if files and self.warehouse.engine != "duckdb":
            raise _problem(
                f"sources.{files[0]}: a file source (path = ...) needs the duckdb warehouse; "
                f"on {self.warehouse.engine}, load the files into a table and name it"
            )
        return self

    @model_validator(mode="after")
    def _iceberg_sources(self) -> ProjectFile:
        found = [name for name, source in self.sources.items() if source.iceberg is not None]
        if found and self.warehouse.tables != "iceberg":
            raise _problem(
                f"sources.{found[0]}: an Iceberg source (iceberg = ...) needs "
                '[warehouse] tables = "iceberg", whose catalog holds the table'
            )
        return self

    def secret_variables(self) -> dict[str, str]:
        """The environment variables that hold the project's secrets, each with what names it:
        no job gets them, and their values are masked in whatever tidegate stores or prints."""
        named = {PGPASSWORD: "libpq's password variable"}
        if self.warehouse.password_env is not None:
            named.setdefault(self.warehouse.password_env, "the [warehouse] password_env")
        if self.state.password_env is not None:
            named.setdefault(self.state.password_env, "the [state] password_env")
        for target in self.notify:
            if target.token_env is not None:
                named.setdefault(target.token_env, f"the token_env of [[notify]] {target.name}")
        return named


def read_project_file(root: Path) -> ProjectFile:
    path = root / PROJECT_FILE
    if not path.is_file():
        raise ConfigError(str(path), "no tidegate.toml here; run `tidegate init` or pass --project")
    check_project_file_size(path, str(path))
    text = read_text(path, str(path))
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


def sources_of(parsed: ProjectFile, root: Path) -> dict[str, Source]:
    return {
        name: Source(
            name=name,
            table=section.table or name,
            time_column=section.time_column,
            min_rows=section.min_rows,
            iceberg=section.iceberg,
            files=None if section.path is None else _files(root, section.path, section.format),
        )
        for name, section in parsed.sources.items()
    }


def _files(root: Path, path: str, declared: str | None) -> SourceFiles:
    absolute = os.path.normpath(os.path.join(root.resolve(), os.path.expanduser(path)))
    found = declared or file_format(path)
    if found is None:  # the section's validator refuses it
        raise ValueError(path)
    return SourceFiles(absolute, found, path)
