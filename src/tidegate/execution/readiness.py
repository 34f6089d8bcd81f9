"""Can a version run against the warehouse as it is now? Its sources, the columns its query
reads and the contract of what it produces, checked before anything is written: by deploy's
preflight, and by a backfill, rerun or recovery (their resumes and dry runs too) before it
starts (a source column dropped, renamed or retyped under an active version would otherwise
fail every partition, one by one)."""

from __future__ import annotations

from tidegate.domain.errors import EngineError, RefusedError
from tidegate.domain.model import Column, Version
from tidegate.engines.base import Engine, bound_values
from tidegate.execution.audit import contract_problems
from tidegate.execution.update import table_problems
from tidegate.project.loader import Project
from tidegate.sql.model_sql import missing_column
from tidegate.sql.sandbox import stored_refusal
from tidegate.sql.statements import schema_and_name


def version_problems(engine: Engine, project: Project, version: Version) -> list[str]:
    """What would stop `version` from running on `engine`: a missing source table, time column
    or key column, a query the engine cannot plan, output that breaks the contract, or a
    published table whose columns the version would have to retype. Reads only."""
    if version.lost:
        return [
            "its definition was lost with the ledger (rebuilt from commit markers); run a "
            "version `tidegate build` made"
        ]
    spec = version.spec
    problems: list[str] = []
    for name in spec.sources:
        source = project.sources[name]
        schema, table = schema_and_name(source.table)
        found = engine.table_columns(table, schema)
        keys_in = spec.key_column_in(name)
        if found is None:
            problems.append(f"source {name}: table {source.table} does not exist")
        elif source.time_column and source.time_column not in {c.name for c in found}:
            problems.append(f"source {name}: no time column {source.time_column}")
        elif keys_in not in {None, *(c.name for c in found)}:
            problems.append(f"source {name}: no column {keys_in} (key_sources)")
    if spec.update is not None:
        problems += table_problems(engine, spec)
    refused = stored_refusal(version.sql) if spec.program is None else None
    if refused is not None:
        problems.append(refused)
    unready = [m for m in spec.upstream if engine.table_columns(m) is None]
    first = spec.first_partition()
    # a program's columns are known once it runs: the audit checks them
    if not problems and not unready and first is not None and spec.program is None:
        try:
            produced = engine.query_columns(
                version.sql, bound_values(first, first.label(spec.keys))
            )
        except EngineError as error:
            tables = {project.sources[n].table: f"source {n}" for n in spec.sources}
            tables.update({m: f"model {m}" for m in spec.upstream})
            missing = missing_column(version.sql, str(error), tables)
            problems.append(
                f"the query cannot be planned: {error}"
                if missing is None
                else f"{version.model} v{version.seq}: {missing} ({str(error).splitlines()[0]})"
            )
        else:
            # nullability is only known once rows exist: the audit checks it per partition
            planned = [Column(c.name, c.type, False) for c in produced]
            problems += contract_problems(spec.columns, planned)
    published = engine.table_columns(spec.name) or []
    declared = {c.name: c.type for c in spec.columns}
    problems += [
        f"published column {c.name} is {c.type}; v{version.seq} writes {declared[c.name]}"
        for c in published
        if c.name in declared and declared[c.name] != c.type
    ]
    return problems


def refuse_unready(version: Version, problems: list[str]) -> None:
    """Refuse a run of `version` that could not succeed, before it starts."""
    if problems:
        raise RefusedError(
            f"{version.spec.name} v{version.seq} cannot run against the warehouse as it is now, "
            "nothing started: " + "; ".join(problems)
        )
