"""Loading and validating a whole project into pure domain values."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tidegate.domain.command import secret_uses
from tidegate.domain.errors import ConfigError
from tidegate.domain.graph import CycleError, topological_order
from tidegate.domain.model import ModelSpec, Source
from tidegate.domain.secrets import Secrets
from tidegate.project import cache, toml_errors
from tidegate.project.config import ProjectFile, read_project_file, sources_of
from tidegate.project.layout import MODEL_SUFFIXES, MODELS_DIR, PROJECT_FILE
from tidegate.project.text_files import check_model_size, relative_path
from tidegate.project.view import LedgerPlace, ProjectView, model_named

if TYPE_CHECKING:
    from tidegate.dbt.models import DbtProject
    from tidegate.engines.base import Engine
    from tidegate.project.model_file import ModelFile


@dataclass(frozen=True)
class Project:
    root: Path
    settings: ProjectFile
    sources: dict[str, Source]
    models: dict[str, ModelSpec]
    order: tuple[str, ...]
    # what tidegate made of the `[dbt]` section's project
    dbt: DbtProject | None = None

    @property
    def warehouse_path(self) -> Path:
        return self.root / self.settings.warehouse.path

    @property
    def state_path(self) -> Path:
        return self.root / self.settings.state.path

    def secrets(self, environ: Mapping[str, str] | None = None) -> Secrets:
        """The project's secrets, read from `environ` (tidegate's environment by default)."""
        return Secrets(self.settings.secret_variables(), os.environ if environ is None else environ)

    def model(self, name: str) -> ModelSpec:
        return model_named(self.models, name)

    def view(self) -> ProjectView:
        state = self.settings.state
        return ProjectView(
            root=self.root,
            name=self.settings.project.name,
            tables=self.settings.warehouse.tables,
            state=LedgerPlace(state.path, state.url, state.db_schema, state.password_env),
            order=self.order,
            models=self.models,
        )


def load_project(root: Path) -> Project:
    """The project at `root`, every file checked; what it made is kept in the project cache,
    and SQL models whose files the cache knows unchanged are taken from it."""
    stored = cache.stored_cache(root)
    before = cache.inputs_of(root, stored)
    settings = read_project_file(root)
    sources = sources_of(settings, root)
    dbt = _dbt_project(root, settings, sources)
    dbt_models = dbt.models if dbt is not None else {}
    if dbt is not None:
        sources = {**sources, **dbt.sources}
    files = model_files_of(root)
    names = {f.stem for f in files} | set(dbt_models)
    # a dbt project's sources, which SQL models may read, are not among the cache's digests
    known = cache.reusable_specs(root, stored, before, names) if dbt is None else {}
    models: dict[str, ModelSpec] = {}
    model_files = _ModelFiles(root, files)
    for file in files:
        check_model_size(file, relative_path(root, file), settings.limits.model_file_bytes)
        if file.stem in dbt_models:
            raise ConfigError(
                relative_path(root, file),
                f"model {file.stem!r} is also a model of the dbt project "
                f"({dbt_models[file.stem].path}); rename one of them",
                1,
            )
        if file.stem in known:
            models[file.stem] = known[file.stem]
            continue
        from tidegate.project.declarations import declare, read_model

        model_file, program = read_model(root, file)
        spec = declare(model_file, file.stem, sources, names, program)
        models[spec.name], model_files[spec.name] = spec, model_file
    models.update(dbt_models)
    _check_updates(settings, models, model_files)
    _refuse_secret_variables(settings, models, model_files)
    _refuse_unreadable_upstreams(models, model_files)
    for consumer in settings.consumers:
        if consumer.model not in models:
            text = (root / PROJECT_FILE).read_text()
            raise ConfigError(
                PROJECT_FILE,
                f"consumers: {consumer.name} reads {consumer.model!r}, which is not a model",
                toml_errors.line_of_key(text, ("consumers", "model")),
            )
    try:
        order = topological_order({name: spec.upstream for name, spec in models.items()})
    except CycleError as error:
        first, second = error.cycle[0], error.cycle[1]
        if first not in model_files.paths:
            raise ConfigError(models[first].path, str(error)) from None
        from tidegate.project.declarations import upstream_line

        model_file = model_files[first]
        raise ConfigError(model_file.path, str(error), upstream_line(model_file, second)) from None
    project = Project(root, settings, sources, models, tuple(order), dbt)
    cache.remember(project, before)
    return project


class _ModelFiles(dict[str, "ModelFile"]):
    """The model files read while loading, by model name; one whose declaration came from the
    cache is read when a check needs its lines (to name the line at fault)."""

    def __init__(self, root: Path, files: list[Path]) -> None:
        super().__init__()
        self.root = root
        self.paths = {f.stem: f for f in files}

    def __missing__(self, name: str) -> ModelFile:
        from tidegate.project.declarations import read_model

        model_file = self[name] = read_model(self.root, self.paths[name])[0]
        return model_file


def _dbt_project(
    root: Path, settings: ProjectFile, sources: dict[str, Source]
) -> DbtProject | None:
    """The models and sources of the `[dbt]` section's project (None without one)."""
    if settings.dbt is None:
        return None
    # imported here: the dbt modules (and the warehouse, to describe columns) only for dbt
    from tidegate.dbt.load import load_dbt

    def open_read_only(found: Mapping[str, Source]) -> Engine:
        from tidegate.engines.factory import open_engine

        return open_engine(Project(root, settings, dict(found), {}, ()), False, read_only=True)

    redact = Secrets(settings.secret_variables(), os.environ).redactor()
    from tidegate.project.declarations import is_reserved

    return load_dbt(root, settings, sources, redact, is_reserved, open_read_only)


def _check_updates(
    settings: ProjectFile, models: dict[str, ModelSpec], model_files: dict[str, ModelFile]
) -> None:
    """An update model writes a table nobody else publishes: its `table` may not be a model's
    table (a published partition rewritten in place would bypass the gates, and its markers
    and checksums would no longer describe it) nor sit in a schema of tidegate's own."""
    schema = settings.warehouse.db_schema if settings.warehouse.engine == "postgres" else None
    for name, spec in models.items():
        if spec.update is None:
            continue

        from tidegate.sql.postgres import STAGING_SCHEMA
        from tidegate.sql.statements import META_SCHEMA, SHADOW_SCHEMA

        own = {META_SCHEMA, SHADOW_SCHEMA, STAGING_SCHEMA}
        if settings.state.url is not None:
            own.add(settings.state.db_schema)
        model = model_files[name]
        target = spec.update.table
        if target in models:
            raise ConfigError(
                model.path,
                f"table: {target!r} is the table of model {target}, which tidegate publishes; "
                "an update model fills columns of a table the application owns",
                model.header_line("table"),
            )
        if schema in own:
            raise ConfigError(
                model.path,
                f"table: the warehouse schema {schema} holds tidegate's own tables; an update "
                "model fills columns of a table the application owns",
                model.header_line("table"),
            )


def _refuse_secret_variables(
    settings: ProjectFile, models: dict[str, ModelSpec], model_files: dict[str, ModelFile]
) -> None:
    """A job never gets a variable holding one of tidegate's secrets: a model whose `env` or
    `env_passthrough` would hand one over is refused, at the line of the key at fault."""
    secret = settings.secret_variables()
    for name, spec in models.items():
        named = [v for v in spec.stream.env if v in secret] if spec.stream is not None else []
        if named:
            raise ConfigError(
                spec.path,
                f"env: {named[0]} holds {secret[named[0]]}; tidegate's secrets are never given "
                "to a job",
                model_files[name].header_line("env"),
            )
        if spec.program is None:
            continue
        uses = secret_uses(spec.program.env, spec.program.passthrough, secret)
        if uses:
            model = model_files[name]
            first = uses[0]
            line = (
                model.header_line("env_passthrough")
                if first.key == "env_passthrough"
                else model.header_line("env", first.key.split(".", 1)[1])
            )
            raise ConfigError(model.path, first.message(), line)


def _refuse_unreadable_upstreams(
    models: dict[str, ModelSpec], model_files: dict[str, ModelFile]
) -> None:
    """A model reads upstream partitions by their time windows or keys: an update model has
    neither (it publishes no table of its own), nor does a cursor model (its intervals)."""
    for name, spec in models.items():
        for parent in spec.upstream:
            problem = _unreadable(models[parent])
            if problem is None:
                continue
            from tidegate.project.declarations import upstream_line

            model_file = model_files[name]
            raise ConfigError(model_file.path, problem, upstream_line(model_file, parent))


def _unreadable(parent: ModelSpec) -> str | None:
    if parent.update is not None:
        return (
            f"reads {parent.name!r}, an update model, which publishes no table of its own: "
            f"read the table {parent.update.table!r} as a source"
        )
    if parent.cursor is not None:
        return (
            f"reads the cursor model {parent.name!r}: reading a cursor model is not supported yet"
        )
    return None


def model_files_of(root: Path) -> list[Path]:
    """The model files of a project: `.sql`, `.toml` (command or dbt) and `.py` (Python; those
    whose name starts with `_` are helper modules, not models). One file per model name."""
    folder = root / MODELS_DIR
    if not folder.is_dir():
        return []
    files = sorted(
        f
        for f in folder.iterdir()
        if f.is_file()
        and f.suffix in MODEL_SUFFIXES
        and not (f.suffix == ".py" and f.name.startswith("_"))
    )
    seen: dict[str, Path] = {}
    for file in files:
        if file.stem in seen:
            raise ConfigError(
                file.relative_to(root).as_posix(),
                f"model {file.stem!r} is declared twice: also by {seen[file.stem].name}",
                1,
            )
        seen[file.stem] = file
    return files
