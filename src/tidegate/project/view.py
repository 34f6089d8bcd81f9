"""What the ledger's readers need of a project: its name, where its ledger is, its models'
declarations and their order. Light to build (no SQL parser, no validation of the project
file): `status`, `show` and `history` read it from the project cache when the project's files
are unchanged (project/cache.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tidegate.domain.errors import UsageError
from tidegate.domain.model import ModelSpec


@dataclass(frozen=True)
class LedgerPlace:
    """The `[state]` section as the ledger's opener reads it."""

    path: str
    url: str | None
    db_schema: str
    password_env: str | None


@dataclass(frozen=True)
class ProjectView:
    root: Path
    name: str
    # the warehouse's `tables` ("engine" or "iceberg")
    tables: str
    state: LedgerPlace
    order: tuple[str, ...]
    models: Mapping[str, ModelSpec]

    def model(self, name: str) -> ModelSpec:
        return model_named(self.models, name)


def model_named(models: Mapping[str, ModelSpec], name: str) -> ModelSpec:
    """The declaration of model `name`; UsageError naming the models when there is none."""
    if name not in models:
        known = ", ".join(sorted(models)) or "none"
        raise UsageError(f"unknown model {name!r} (models: {known})")
    return models[name]
