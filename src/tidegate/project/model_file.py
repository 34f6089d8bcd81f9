"""Model files: `models/NAME.sql`, a TOML header in a leading `/* tidegate ... */` comment,
then one SELECT. The declaration keys are shared with the other kinds of model (Python models'
decorator, command models' TOML file), which add their own."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tidegate.domain.errors import ConfigError
from tidegate.domain.partitions import Grain
from tidegate.project import toml_errors

HEADER = re.compile(r"\A(?P<before>\s*)/\*\s*tidegate[ \t]*\n(?P<body>.*?)\*/", re.DOTALL)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Check(_Strict):
    name: str | None = Field(
        default=None,
        description="The check's name in results and messages, a plain identifier unique in the "
        "model (default: the type and the columns, `unique_order_date_status`).",
    )
    severity: Literal["blocking", "warn"] = Field(
        default="blocking",
        description="`blocking`: a failure stops the partition's publish. `warn`: it is "
        "recorded and shown, and the partition is published.",
    )


class NotNullCheck(_Check):
    """No row holds NULL in any of the columns."""

    type: Literal["not_null"] = Field(description="`not_null`.")
    columns: list[str] = Field(min_length=1, description="The columns that must not be NULL.")


class UniqueCheck(_Check):
    """No two rows of a partition share the values of the columns."""

    type: Literal["unique"] = Field(description="`unique`.")
    columns: list[str] = Field(
        min_length=1, description="The columns whose values together identify a row."
    )


class AcceptedValuesCheck(_Check):
    """Every value of the column is one of the listed values."""

    type: Literal["accepted_values"] = Field(description="`accepted_values`.")
    column: str = Field(description="The column checked.")
    values: list[str | int | float] = Field(min_length=1, description="The values it may hold.")


class RowCountCheck(_Check):
    """The partition's row count: absolute (`min`, `max`), or relative to a baseline
    (`relative_to`, with `min_ratio` and/or `max_ratio`)."""

    # which combinations make sense is the loader's to judge, with the line of the offending key
    type: Literal["row_count"] = Field(description="`row_count`.")
    min: int | None = Field(
        default=None, ge=0, description="Absolute: the fewest rows a partition may hold."
    )
    max: int | None = Field(
        default=None, ge=0, description="Absolute: the most rows a partition may hold."
    )
    relative_to: Literal["previous", "source"] | None = Field(
        default=None,
        description="Relative: against the same model's previous published partition "
        "(`previous`; none published passes), or the source rows in the partition's window "
        "(`source`, with `source`).",
    )
    source: str | None = Field(
        default=None,
        description='With `relative_to = "source"`: the source (one the model reads) whose rows '
        "in the window are the baseline.",
    )
    min_ratio: float | None = Field(
        default=None, description="Relative: the smallest rows / baseline ratio (above 0)."
    )
    max_ratio: float | None = Field(
        default=None, description="Relative: the largest rows / baseline ratio (above 0)."
    )


class ExpressionCheck(_Check):
    """A predicate every row must satisfy."""

    type: Literal["expression"] = Field(description="`expression`.")
    expression: str = Field(
        min_length=1,
        description="An SQL predicate over the model's declared columns only "
        "(`net_revenue <= gross_revenue`).",
    )


# Ranges of the new kinds' numbers are checked by the loader, which can point at the key's line
# inside its own [[checks]] table (a pydantic location names only the key).
class NullRatioCheck(_Check):
    """The fraction of the partition's rows where the column is NULL stays at most `max`."""

    type: Literal["null_ratio"] = Field(description="`null_ratio`.")
    column: str = Field(description="The column measured.")
    max: float = Field(description="The largest fraction of NULL rows, from 0 to 1.")


class DistinctCountCheck(_Check):
    """The number of distinct values (tuples of the columns; those with a NULL part not
    counted) lies between `min` and `max`; at least one of them is needed."""

    type: Literal["distinct_count"] = Field(description="`distinct_count`.")
    columns: list[str] = Field(min_length=1, description="The columns whose values are counted.")
    min: int | None = Field(default=None, description="The fewest distinct values (0 or more).")
    max: int | None = Field(default=None, description="The most distinct values (0 or more).")


class FreshnessCheck(_Check):
    """The newest value of the column is at least the partition's end minus `max_age` (time
    grains only)."""

    type: Literal["freshness"] = Field(description="`freshness`.")
    column: str = Field(description="A DATE or TIMESTAMP column of the model.")
    max_age: str = Field(
        description="How old the newest value may be: a number and a unit, `s`, `m`, `h` or `d` "
        "(`26h`)."
    )


class RelationshipsCheck(_Check):
    """Every non-NULL value of the column is a value of `field` in `to` (a model or source),
    as published: referential integrity, as dbt's `relationships` test."""

    type: Literal["relationships"] = Field(description="`relationships`.")
    column: str = Field(description="The column holding references.")
    to: str = Field(
        min_length=1,
        description="The model or source referenced (read as published, not as an input: a "
        "model computed from this one cannot be referenced).",
    )
    field: str = Field(min_length=1, description="The column of `to` the values must be in.")


class QueryCheck(_Check):
    """A SELECT returning the violating rows: each row it returns fails its own partition (a
    row with no partition value fails every partition of the batch)."""

    type: Literal["query"] = Field(description="`query`.")
    sql: str = Field(
        min_length=1,
        description="One SELECT without parameters that reads only `this` (the staged rows) and "
        "tables the model reads, and returns the partition column.",
    )


CheckDecl = Annotated[
    NotNullCheck
    | UniqueCheck
    | AcceptedValuesCheck
    | RowCountCheck
    | ExpressionCheck
    | NullRatioCheck
    | DistinctCountCheck
    | FreshnessCheck
    | RelationshipsCheck
    | QueryCheck,
    Field(discriminator="type"),
]


class ReconciliationDecl(_Strict):
    """A `[[reconciliations]]` table: an aggregate of what the model reads compared with an
    aggregate of what it wrote, per partition; a mismatch fails the partition."""

    name: str = Field(min_length=1, description="The reconciliation's name in results.")
    source: str = Field(
        min_length=1, description="A source or upstream model the model reads: the input side."
    )
    source_expression: str = Field(
        min_length=1,
        description="An aggregate over the source's rows in the partition's window "
        "(`sum(gross_amount - discount - refund)`).",
    )
    target_expression: str = Field(
        min_length=1,
        description="An aggregate over the partition's output rows, of the model's declared "
        "columns only (`sum(net_revenue)`).",
    )
    tolerance: float = Field(
        default=0,
        ge=0,
        description="How far the two may differ (default 0: exact).",
    )


class Declaration(_Strict):
    """What every kind of model declares."""

    grain: Grain = Field(
        description="What one partition is: an `hour`, `day` or `month` of time, a `key` of a "
        "declared list, a `range` of an integer key (update models), a `cursor` interval, or "
        "the whole `table` (SQL models: one partition, `all`, its inputs read whole)."
    )
    time_column: str | None = Field(
        default=None,
        description="Time grains (required): the output column that holds the partition's time.",
    )
    key_column: str | None = Field(
        default=None,
        description="Grain `key` or `range` (required): the column that holds the partition's key.",
    )
    keys: list[str] = Field(
        default=[],
        description="Grain `key` (required): the keys, one partition each (`$key` in the SQL).",
    )
    # the rows of a key partition: read, fingerprinted and reconciled with only those
    key_sources: dict[str, str] = Field(
        default={},
        description="Grain `key`: for a source (by name), the column that holds the model's keys; "
        "a key partition then reads only the rows holding its key. A source not named is read "
        "whole by every key.",
    )
    start: str | None = Field(
        default=None, description='Time grains: the first partition (`"2025-01-01"`).'
    )
    min_rows: int | None = Field(
        default=None,
        ge=0,
        description="The rows a partition must hold for a downstream model to read it. Default: "
        "the smallest `min_rows` of the sources and models it reads. It does not stop the "
        "model's own publish (a `row_count` check does).",
    )
    # "update" is for update models (UpdateHeader): the loader says so to an SQL model
    write_mode: Literal["overwrite", "merge", "append", "update"] = Field(
        default="overwrite",
        description="How a publish treats the rows a partition holds: replaced (`overwrite`), "
        "upserted by `unique_key` (`merge`), added to (`append`), or, for an update model, "
        "columns of an existing table set in place (`update`).",
    )
    unique_key: list[str] = Field(
        default=[],
        description="The columns that identify a row (`NOT NULL` for `merge` and `append`); "
        "`merge` needs it, and staged rows must hold each key once per partition.",
    )
    schedule: str | None = Field(
        default=None,
        description='A cron expression in UTC (`"0 2 * * *"`): a partition is due for `run` when '
        "it fires after the partition's period ends.",
    )
    columns: dict[str, str] = Field(
        min_length=1,
        description='The contract: each output column and its type (`"DECIMAL(18, 2) NOT '
        'NULL"`), enforced on every write.',
    )
    deprecated: dict[str, str] = Field(
        default={},
        description="A compatibility window: for a column, the date (UTC) until which readers "
        "may still rely on it; after it, a version may remove or retype the column.",
    )
    checks: list[CheckDecl] = Field(
        default=[],
        description="Data checks judged per partition before publish, one `[[checks]]` table each.",
    )
    reconciliations: list[ReconciliationDecl] = Field(
        default=[],
        description="Input-to-output comparisons per partition, one `[[reconciliations]]` table "
        "each.",
    )
    cursor_column: str | None = Field(
        default=None,
        description="Grain `cursor` (required): the source column the cursor measures, an "
        "integer or a TIMESTAMP, `NOT NULL`; the output carries it too.",
    )
    cursor_source: str | None = Field(
        default=None,
        description="Grain `cursor`: the source the cursor measures (needed when the model reads "
        "several).",
    )
    cursor_start: int | str | None = Field(
        default=None,
        description='Grain `cursor`: where this version starts (an integer, or `"2026-01-01 '
        '00:00:00"`) until it has published, instead of the committed cursor.',
    )
    cursor_lag: int | str | None = Field(
        default=None,
        description='Grain `cursor`: the lag rule, ids or a duration for timestamps (`"30s"`): '
        "the watermark stays this far below the newest value.",
    )
    cursor_batch_rows: int | None = Field(
        default=None,
        gt=0,
        description="Grain `cursor`: the most source rows one batch processes (default: one "
        "batch).",
    )
    cursor_unique: bool | None = Field(
        default=None,
        description="Grain `cursor`: no two source rows share a cursor value (an id from a "
        "sequence), so a run may go up to the newest value instead of leaving it to the next run.",
    )


class ModelHeader(Declaration):
    """An SQL model's header: what it reads is inferred from its SELECT."""

    kind: Literal["sql"] = Field(default="sql", description="`sql`, implied by the `.sql` file.")


class ProgramHeader(Declaration):
    """A model that is not one SELECT declares what it reads: tidegate cannot infer it."""

    upstream: list[str] = Field(
        default=[], description="The models it reads (tidegate cannot infer them)."
    )
    sources: list[str] = Field(
        default=[],
        description="The sources of tidegate.toml it reads (tidegate cannot infer them).",
    )


class PythonHeader(ProgramHeader):
    """A Python model's declaration: the keyword arguments of `@tidegate.model(...)`."""

    kind: Literal["python"] = Field(
        default="python", description="`python`, implied by the `.py` file."
    )
    packages: list[str] = Field(
        default=[],
        description="Installed packages whose versions take part in the fingerprint.",
    )


class JobHeader(ProgramHeader):
    """A model whose rows an external process computes (a command or dbt): its environment and
    time limit."""

    env: dict[str, str] = Field(
        default={},
        description="Variables set for the job; values may reference tidegate's environment as "
        "`${NAME}` (recorded as `***`). tidegate's secrets are refused.",
    )
    env_passthrough: list[str] = Field(
        default=[],
        description="Variables of tidegate's environment the job gets as they are, when set "
        "(`AWS_PROFILE`). tidegate's secrets are refused.",
    )
    timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        description="The job's time limit; past it, its whole process group is killed and the "
        "attempt fails (default: none).",
    )


class CommandHeader(JobHeader):
    """A command model's declaration: `models/NAME.toml`."""

    kind: Literal["command"] = Field(
        default="command", description="`command`, the default of a `models/NAME.toml`."
    )
    command: list[str] = Field(
        min_length=1,
        description="The command line, run in the project folder, with placeholders `{start}`, "
        "`{end}`, `{key}`, `{output}`, `{inputs}`, `{model}` and `{python}`.",
    )


class DbtHeader(JobHeader):
    """A model of a dbt project, run by tidegate's own dbt (dbt-duckdb, external
    materialization into the output folder)."""

    kind: Literal["dbt"] = Field(description="`dbt` (required).")
    dbt_project: str = Field(
        min_length=1, description="The dbt project's folder, relative to the tidegate project."
    )
    dbt_model: str = Field(
        min_length=1, description="The dbt model to run (`dbt run --select MODEL`)."
    )


class FlinkOutputDecl(_Strict):
    """The `[output]` table of a Flink model: where its sink commits files."""

    path: str = Field(
        min_length=1,
        description="The folder the job's file sink writes (relative to the project, or "
        "absolute); the job is given it (a shadow folder when validating).",
    )
    format: Literal["csv"] = Field(
        default="csv",
        description="`csv`: lines of the declared `columns`, in their order, no header.",
    )
    idempotent: bool = Field(
        default=False,
        description="Whether replaying events into the output leaves it as it was (a keyed "
        "upsert downstream): a rollback that re-reads events then needs no `--approve`.",
    )
    key: list[str] = Field(
        default=[],
        description="The columns that identify an output row (one event's): `validate` then "
        "compares the new version's rows with the running version's, row by row, on the "
        "columns both have.",
    )


class FlinkHeader(Declaration):
    """A Flink stream job, released by savepoint: `models/NAME.toml` with `kind = "flink"`."""

    kind: Literal["flink"] = Field(description="`flink` (required).")
    grain: Grain = Field(
        default=Grain.TABLE, description="Not for Flink models: a stream has one job, no grain."
    )
    job: str = Field(
        pattern=r"^[^:]+\.py:[A-Za-z_][A-Za-z0-9_]*$",
        description="`path/to/module.py:function`: a function `(env, output)` that adds the job "
        "to a PyFlink `StreamExecutionEnvironment`, its sink writing into the folder `output`. "
        "Give every operator a `uid`: state is restored by it.",
    )
    checkpoints: str = Field(
        min_length=1,
        description="The checkpoint and savepoint location (relative to the project, or "
        "absolute). Part of the version: a job restoring from elsewhere is another version.",
    )
    parallelism: int = Field(default=1, gt=0, description="The job's parallelism.")
    env: list[str] = Field(
        default=[],
        description="The credentials the job needs, by name (`LAKE_TOKEN`): part of the version, "
        "never their values; a version whose variables are not set does not start.",
    )
    output: FlinkOutputDecl = Field(description="What the job writes (`[output]`).")
    checkpoint_interval_seconds: float = Field(
        default=1.0, gt=0, description="How often the job checkpoints (exactly once)."
    )
    confirm_checkpoints: int = Field(
        default=2,
        gt=0,
        description="A takeover is confirmed once the new job is RUNNING and has completed this "
        "many checkpoints after its start, with no restart.",
    )
    confirm_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        description="Past this, an unconfirmed takeover fails: the previous version restarts "
        "from the same savepoint.",
    )
    restart_attempts: int = Field(
        default=2,
        ge=0,
        description="Restarts Flink may make before the job fails (never a RUNNING/RESTARTING "
        "loop without end).",
    )


class UpdateHeader(Declaration):
    """An update model: columns of an existing table set, one key range per transaction, to
    SQL expressions over the row's own columns (`[set]`)."""

    table: str = Field(
        min_length=1,
        description="The existing table to update; tidegate never creates, drops or replaces it.",
    )
    chunk_size: int = Field(
        gt=0,
        description="The keys in one partition: `[k, k + chunk_size)`, `k` a multiple of it.",
    )
    assignments: dict[str, str] = Field(
        alias="set",
        min_length=1,
        description="The `[set]` table: each column to set, with an SQL expression over the "
        "row's own columns.",
    )
    # what the table holds: no contract to declare
    columns: dict[str, str] = Field(
        default={}, description="Not for update models: the table holds its own columns."
    )
    lock_timeout: str | None = Field(
        default=None,
        description='PostgreSQL: the bound on each lock wait of a statement (`"2s"`); '
        "`backfill --lock-timeout` overrides it.",
    )
    statement_timeout: str | None = Field(
        default=None,
        description='PostgreSQL: the bound on each statement of a range\'s transaction (`"30s"`); '
        "`backfill --statement-timeout` overrides it.",
    )


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

    def refuse_declared(self, keys: Sequence[str], why: Callable[[str], str]) -> None:
        """A ConfigError at the first of `keys` the header declares (not empty), `key: why`."""
        for key in keys:
            if getattr(self.header, key):
                raise ConfigError(self.path, f"{key}: {why(key)}", self.header_line(key))

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
