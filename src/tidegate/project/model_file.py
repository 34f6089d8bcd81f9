"""Model files: `models/NAME.sql`, a TOML header in a leading `/* tidegate ... */` comment,
then one SELECT. The declaration keys are shared with the other kinds of model (Python models'
decorator, command models' TOML file), which add their own."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tidegate.domain.errors import ConfigError
from tidegate.domain.partitions import Grain
from tidegate.project import toml_errors

HEADER = re.compile(r"\A(?P<before>\s*)/\*\s*tidegate[ \t]*\n(?P<body>.*?)\*/", re.DOTALL)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Check(_Strict):
    name: str | None = None
    severity: Literal["blocking", "warn"] = "blocking"


class NotNullCheck(_Check):
    type: Literal["not_null"]
    columns: list[str] = Field(min_length=1)


class UniqueCheck(_Check):
    type: Literal["unique"]
    columns: list[str] = Field(min_length=1)


class AcceptedValuesCheck(_Check):
    type: Literal["accepted_values"]
    column: str
    values: list[str | int | float] = Field(min_length=1)


class RowCountCheck(_Check):
    """Absolute (`min`, `max`), or relative to a baseline (`relative_to`, ratios): which
    combinations make sense is the loader's to judge, with the line of the offending key."""

    type: Literal["row_count"]
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)
    relative_to: Literal["previous", "source"] | None = None
    source: str | None = None
    min_ratio: float | None = None
    max_ratio: float | None = None


class ExpressionCheck(_Check):
    type: Literal["expression"]
    expression: str = Field(min_length=1)


# Ranges of the new kinds' numbers are checked by the loader, which can point at the key's line
# inside its own [[checks]] table (a pydantic location names only the key).
class NullRatioCheck(_Check):
    type: Literal["null_ratio"]
    column: str
    max: float


class DistinctCountCheck(_Check):
    type: Literal["distinct_count"]
    columns: list[str] = Field(min_length=1)
    min: int | None = None
    max: int | None = None


class FreshnessCheck(_Check):
    type: Literal["freshness"]
    column: str
    max_age: str


class QueryCheck(_Check):
    type: Literal["query"]
    sql: str = Field(min_length=1)


CheckDecl = Annotated[
    NotNullCheck
    | UniqueCheck
    | AcceptedValuesCheck
    | RowCountCheck
    | ExpressionCheck
    | NullRatioCheck
    | DistinctCountCheck
    | FreshnessCheck
    | QueryCheck,
    Field(discriminator="type"),
]


class ReconciliationDecl(_Strict):
    name: str = Field(min_length=1)
    source: str = Field(min_length=1)
    source_expression: str = Field(min_length=1)
    target_expression: str = Field(min_length=1)
    tolerance: float = Field(default=0, ge=0)


class Declaration(_Strict):
    """What every kind of model declares."""

    grain: Grain
    time_column: str | None = None
    key_column: str | None = None
    keys: list[str] = []
    # grain "key": the column of each source (by name) that holds the model's keys; a key
    # partition then reads, fingerprints and reconciles with only the rows holding its key
    key_sources: dict[str, str] = {}
    start: str | None = None
    # the rows a partition must hold for a downstream model to read it (None: the smallest
    # min_rows of what the model reads)
    min_rows: int | None = Field(default=None, ge=0)
    # "update" is for update models (UpdateHeader): the loader says so to an SQL model
    write_mode: Literal["overwrite", "merge", "append", "update"] = "overwrite"
    unique_key: list[str] = []
    schedule: str | None = None
    columns: dict[str, str] = Field(min_length=1)
    # column → the date until which readers may still rely on it (a compatibility window)
    deprecated: dict[str, str] = {}
    checks: list[CheckDecl] = []
    reconciliations: list[ReconciliationDecl] = []
    # grain "cursor": the source column the cursor measures (the output carries it too), the
    # source (needed when the model reads several), where a version starts, the lag rule and
    # the most rows one batch processes
    cursor_column: str | None = None
    cursor_source: str | None = None
    cursor_start: int | str | None = None
    cursor_lag: int | str | None = None
    cursor_batch_rows: int | None = Field(default=None, gt=0)
    # no two source rows share a cursor value (an id from a sequence): a run may go up to the
    # newest value instead of leaving it to the next run
    cursor_unique: bool | None = None


class ModelHeader(Declaration):
    """An SQL model's header: what it reads is inferred from its SELECT."""

    kind: Literal["sql"] = "sql"


class ProgramHeader(Declaration):
    """A model that is not one SELECT declares what it reads: tidegate cannot infer it."""

    upstream: list[str] = []
    sources: list[str] = []


class PythonHeader(ProgramHeader):
    kind: Literal["python"] = "python"
    # installed packages whose versions take part in the fingerprint
    packages: list[str] = []


class JobHeader(ProgramHeader):
    """A model whose rows an external process computes (a command or dbt): its environment and
    time limit."""

    # variables set for the job; values may reference tidegate's environment as ${NAME}
    env: dict[str, str] = {}
    # variables of tidegate's environment the job gets as they are, when set
    env_passthrough: list[str] = []
    timeout_seconds: float | None = Field(default=None, gt=0)


class CommandHeader(JobHeader):
    kind: Literal["command"] = "command"
    command: list[str] = Field(min_length=1)


class DbtHeader(JobHeader):
    """A model of a dbt project, run by tidegate's own dbt (dbt-duckdb, external
    materialization into the output folder)."""

    kind: Literal["dbt"]
    # the dbt project's folder, relative to the tidegate project, and the model to run
    dbt_project: str = Field(min_length=1)
    dbt_model: str = Field(min_length=1)


class UpdateHeader(Declaration):
    """An update model: columns of an existing table set, one key range per transaction, to
    SQL expressions over the row's own columns (`[set]`)."""

    table: str = Field(min_length=1)
    chunk_size: int = Field(gt=0)
    assignments: dict[str, str] = Field(alias="set", min_length=1)
    # what the table holds: no contract to declare
    columns: dict[str, str] = {}
    lock_timeout: str | None = None
    statement_timeout: str | None = None


Header = TypeVar("Header", bound=Declaration)


def validate_header(
    kind: type[Header],
    data: dict[str, Any],
    path: str,
    text: str,
    first_line: int,
    missing_line: int,
) -> Header:
    """The declaration validated, or a ConfigError naming the line of the key at fault (found
    in `text`, the declaration's TOML starting at line `first_line`); a key that is not in the
    text (missing, or no text at all) points at `missing_line`."""
    try:
        return kind.model_validate(data)
    except ValidationError as error:
        message, location = toml_errors.describe(error)
        found = toml_errors.line_of_key(text, location)
        line = missing_line if found is None else first_line + found - 1
        raise ConfigError(path, message, line) from None


class ModelFile(BaseModel):
    """A model file split into its validated header and its SQL body."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    path: str
    header: Declaration
    header_text: str
    header_first_line: int
    sql: str
    sql_first_line: int
    # a declaration without TOML text (a Python model's decorator): every key is on this line
    fixed_line: int | None = None

    def header_line(self, *location: str | int) -> int | None:
        if self.fixed_line is not None:
            return self.fixed_line
        found = toml_errors.line_of_key(self.header_text, location)
        return None if found is None else self.header_first_line + found - 1

    def check_line(self, index: int, key: str) -> int | None:
        """Line of `key` in the `index`-th `[[checks]]` table (or of the table itself)."""
        if self.fixed_line is not None:
            return self.fixed_line
        lines = self.header_text.splitlines()
        tables = [n for n, text in enumerate(lines) if re.match(r"^\s*\[\[\s*checks\s*\]\]", text)]
        if index >= len(tables):
            return self.header_line("checks")
        found = tables[index]
        for n in range(tables[index] + 1, len(lines)):
            if re.match(r"^\s*\[", lines[n]):
                break
            if re.match(rf'^\s*"?{re.escape(key)}"?\s*=', lines[n]):
                found = n
                break
        return self.header_first_line + found


def read_model_file(path: str, text: str) -> ModelFile:
    match = HEADER.match(text)
    if match is None:
        raise ConfigError(path, "a model file starts with a `/* tidegate` header comment", 1)
    header_first_line = match.group("before").count("\n") + 2
    body = match.group("body")
    try:
        data: dict[str, Any] = toml_errors.loads(body)
    except toml_errors.TOMLDecodeError as error:
        line = toml_errors.decode_line(error)
        raise ConfigError(
            path,
            toml_errors.decode_message(error),
            None if line is None else header_first_line + line - 1,
        ) from None
    # a missing key has no line of its own: point at the header's `/* tidegate` line
    header = validate_header(
        ModelHeader, data, path, body, header_first_line, header_first_line - 1
    )
    sql_first_line = text[: match.end()].count("\n") + 1
    return ModelFile(
        path=path,
        header=header,
        header_text=body,
        header_first_line=header_first_line,
        sql=text[match.end() :],
        sql_first_line=sql_first_line,
    )
