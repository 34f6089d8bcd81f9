"""Build: snapshot every model into an immutable version and classify its change."""

from __future__ import annotations

import platform
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from tidegate import __version__
from tidegate.domain.clock import stamp
from tidegate.domain.fingerprint import fingerprint, short
from tidegate.domain.model import ChangeKind, ModelSpec, Version, classify_change
from tidegate.ops.context import Context
from tidegate.project.config import PROJECT_FILE
from tidegate.project.loader import MODELS_DIR, Project
from tidegate.sql.model_sql import normalized, parse_query, render
from tidegate.state.base import Event


@dataclass(frozen=True)
class Built:
    version: Version
    created: bool
    change: ChangeKind
    active_version: str | None


def tool_versions() -> dict[str, str]:
    found = {"tidegate": __version__, "python": platform.python_version()}
    for package in ("duckdb", "sqlglot"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "absent"
    return found


def git_state(root: Path) -> tuple[str | None, bool]:
    """The commit of the project's repository and whether its model files differ from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", PROJECT_FILE, MODELS_DIR],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None, False
    return head or None, bool(changes)


def snapshot(project: Project, spec: ModelSpec, upstream: dict[str, str]) -> tuple[str, str]:
    """(fingerprint, rendered SQL) of a model given its upstream models' fingerprints."""
    query = parse_query(spec.sql)
    physical = {name: project.sources[name].table for name in spec.sources}
    source_defs = {
        f"source:{name}": f"{project.sources[name].table}|{project.sources[name].time_column}"
        for name in spec.sources
    }
    config = {"model": spec.name, **spec.config(), "sources": source_defs}
    return fingerprint(normalized(query), config, upstream), render(query, physical)


def build(ctx: Context) -> list[Built]:
    project, state = ctx.project, ctx.state
    commit, dirty = git_state(project.root)
    versions = tool_versions()
    fingerprints: dict[str, str] = {}
    results: list[Built] = []
    for name in project.order:
        spec = project.models[name]
        upstream = {parent: fingerprints[parent] for parent in spec.upstream}
        full, rendered = snapshot(project, spec, upstream)
        fingerprints[name] = full
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
            Built(version, existing is None, change, active.version_id if active else None)
        )
    return results
