"""Build: snapshot every model into an immutable version and classify its change."""

from __future__ import annotations

import json
import platform
import shlex
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from tidegate import __version__
from tidegate.domain.clock import stamp
from tidegate.domain.errors import ConfigError, UsageError
from tidegate.domain.fingerprint import column_fingerprint, fingerprint, read_fingerprint, short
from tidegate.domain.model import (
    ChangeKind,
    ModelKind,
    ModelSpec,
    Program,
    Source,
    Version,
    classify_change,
)
from tidegate.flink.places import code_of
from tidegate.ops.context import Context
from tidegate.project.flink_model import INSTALL_HINT
from tidegate.project.layout import MODELS_DIR, PROJECT_FILE
from tidegate.project.loader import Project
from tidegate.project.text_files import read_python, read_text
from tidegate.sql.lineage import column_definitions, columns_read
from tidegate.sql.model_sql import SqlProblem, normalized, parse_query, render
from tidegate.state.base import Event


@dataclass(frozen=True)
class Built:
    version: Version
    created: bool
    change: ChangeKind
    active_version: str | None
    active_seq: int | None = None


def tool_versions() -> dict[str, str]:
    found = {"tidegate": __version__, "python": platform.python_version()}
    for package in ("duckdb", "sqlglot"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "absent"
    return found


def git_state(root: Path, code: tuple[str, ...] = ()) -> tuple[str | None, bool]:
    """The commit of the project's repository and whether its model files (and the folders in
    `code`: a dbt project's) differ from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        changes = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "status",
                "--porcelain",
                "--",
                PROJECT_FILE,
                MODELS_DIR,
                *code,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None, False
    return head or None, bool(changes)


def _source_defs(project: Project, spec: ModelSpec) -> dict[str, str]:
    return {f"source:{name}": _source_def(project.sources[name]) for name in spec.sources}


def _source_def(source: Source) -> str:
    where = f"{source.table}|{source.time_column}"
    files = source.files
    if source.iceberg is not None:
        return f"{where}|iceberg:{source.iceberg}"
    return where if files is None else f"{where}|{files.format}:{files.declared}"


def snapshot(project: Project, spec: ModelSpec, upstream: dict[str, str]) -> tuple[str, str]:
    """(fingerprint, rendered definition) of a model given what it reads of each upstream model
    (`read_fingerprint`s). The definition of an SQL model is its SQL as executed; of a Python
    model its module's source; of a command model its command line. A program's code enters
    the fingerprint through the digests of its files, in its config."""
    config = {"model": spec.name, **spec.config(), "sources": _source_defs(project, spec)}
    if spec.program is not None:
        definition = _definition(project, spec, spec.program)
        return fingerprint("", config, upstream), definition
    query = parse_query(spec.sql)
    physical = {name: project.sources[name].table for name in spec.sources}
    rendered = render(query, physical)
    _refuse_unreadable(project, spec, rendered)
    return fingerprint(normalized(query), config, upstream), rendered


def _refuse_unreadable(project: Project, spec: ModelSpec, rendered: str) -> None:
    """The SQL a version runs is the model's SELECT as sqlglot writes it out, which the
    engines parse again: a few spellings do not survive that (`~ ~ x` is written `~~x`, which
    reads as a LIKE). Refused here, before any version is recorded, not when deployed."""
    try:
        parse_query(rendered)
    except SqlProblem as problem:
        text = read_text(project.root / spec.path, spec.path)
        at = text.find(spec.sql)
        raise ConfigError(
            spec.path,
            f"this SELECT does not parse once written out for the warehouse ({problem.message}); "
            "write the expression another way",
            text[: max(at, 0)].count("\n") + 1,
        ) from None


def _definition(project: Project, spec: ModelSpec, program: Program) -> str:
    """What a version shows of a program: a Python model's module, a dbt model's SQL, a
    command's line."""
    if program.kind is ModelKind.PYTHON:
        return read_python(project.root / spec.path, spec.path)
    if program.kind is ModelKind.FLINK:
        assert spec.stream is not None
        return read_python(project.root / spec.stream.job_file, spec.stream.job_file)
    if program.kind is ModelKind.DBT:
        name = f"{program.entry[1]}.sql"
        path = next(p for p, _ in program.files if p.endswith(name))
        return read_text(project.root / path, path)
    return shlex.join(program.entry)


def columns_read_by(spec: ModelSpec, tables: dict[str, dict[str, str]]) -> dict[str, set[str]]:
    """The columns `spec` reads of each of `tables` (name → column → type) it reads: found in
    an SQL model's SELECT; a program may read any column of what it declares."""
    if spec.program is not None:
        return {name: set(columns) for name, columns in tables.items() if name in spec.upstream}
    return columns_read(parse_query(spec.sql), tables)


def reads(project: Project, spec: ModelSpec) -> dict[str, set[str]]:
    """The columns `spec` reads of each upstream model (as the project's files declare them)."""
    tables = {
        parent: {c.name: c.type for c in project.models[parent].columns} for parent in spec.upstream
    }
    return columns_read_by(spec, tables)


def column_fingerprints(
    project: Project, spec: ModelSpec, upstream: dict[str, str]
) -> dict[str, str]:
    """Each output column's fingerprint: what downstream models that read it depend on."""
    partitioning = {
        "grain": spec.grain.value,
        "partition_column": spec.partition_column,
        "keys": list(spec.keys),
        "sources": _source_defs(project, spec),
    }
    names = [c.name for c in spec.columns]
    definitions = (
        # any change to a program's code may change any of its columns
        dict.fromkeys(names, json.dumps(spec.program.config(), sort_keys=True))
        if spec.program is not None
        else column_definitions(parse_query(spec.sql), names)
    )
    return {
        c.name: column_fingerprint(definitions[c.name], c.type, partitioning, upstream)
        for c in spec.columns
    }


def snapshots(project: Project) -> Iterator[tuple[ModelSpec, str, str, dict[str, str]]]:
    """Each model in dependency order with its fingerprint, rendered definition and upstream
    fingerprints, as the code is now (what `build` records, without recording it)."""
    columns: dict[str, dict[str, str]] = {}
    for name in project.order:
        spec = project.models[name]
        read = reads(project, spec)
        upstream = {
            parent: read_fingerprint(
                {c: columns[parent].get(c, "unknown") for c in read.get(parent, ())}
            )
            for parent in spec.upstream
        }
        full, rendered = snapshot(project, spec, upstream)
        columns[name] = column_fingerprints(project, spec, upstream)
        yield spec, full, rendered, upstream


def _refuse_streams_without_flink(specs: Iterable[ModelSpec]) -> None:
    for spec in specs:
        if spec.stream is not None and not spec.stream.flink_version:
            raise UsageError(
                f"{spec.path}: a Flink model needs PyFlink beside tidegate: {INSTALL_HINT}"
            )


def build(ctx: Context) -> list[Built]:
    project = ctx.project
    # every model is snapshot before the ledger is opened: a refusal records nothing
    snapped = list(snapshots(project))
    _refuse_streams_without_flink(spec for spec, *_ in snapped)
    state = ctx.state
    dbt = project.settings.dbt
    # code outside models/ that versions run: a dbt project, the files of Flink jobs
    code: tuple[str, ...] = (dbt.project,) if dbt is not None else ()
    code += tuple(
        path
        for spec, *_ in snapped
        if spec.stream is not None and spec.program is not None
        for path, _ in spec.program.files
    )
    commit, dirty = git_state(project.root, code)
    versions = tool_versions()
    results: list[Built] = []
    for spec, full, rendered, upstream in snapped:
        name = spec.name
        active = state.active_version(name)
        existing = state.find_version(name, full)
        change = classify_change(
            active.spec.columns if active else None,
            spec.columns,
            active is not None and active.fingerprint == full,
        )
        if existing is None:
            version = state.save_version(
                Version(
                    version_id=short(full),
                    model=name,
                    seq=state.next_seq(name),
                    fingerprint=full,
                    sql=rendered,
                    spec=spec,
                    upstream_fingerprints=upstream,
                    git_commit=commit,
                    git_dirty=dirty,
                    tool_versions=versions,
                    created_at=stamp(ctx.clock),
                    change=change,
                )
            )
            if spec.stream is not None:
                code_of(project.root, version)  # the code it runs, kept as it is now
            state.record_event(
                Event(
                    kind="build",
                    actor=ctx.actor,
                    at=stamp(ctx.clock),
                    model=name,
                    version_id=version.version_id,
                    detail={"change": change.value, "seq": version.seq},
                )
            )
        else:
            version = existing
        results.append(
            Built(
                version,
                existing is None,
                change,
                active.version_id if active else None,
                active.seq if active else None,
            )
        )
    return results
