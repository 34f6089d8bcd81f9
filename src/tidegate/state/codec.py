"""Turning domain values into ledger rows and back."""

from __future__ import annotations

import json
from typing import Any

from tidegate.domain.model import (
    ChangeKind,
    CheckSpec,
    Column,
    ModelSpec,
    Reconciliation,
    Severity,
    Version,
    WriteMode,
)
from tidegate.domain.partitions import Grain


def spec_to_json(spec: ModelSpec) -> str:
    return json.dumps(
        {
            "name": spec.name,
            "path": spec.path,
            "sql": spec.sql,
            "grain": spec.grain.value,
            "partition_column": spec.partition_column,
            "columns": [[c.name, c.type, c.nullable] for c in spec.columns],
            "start": spec.start,
            "keys": list(spec.keys),
            "write_mode": spec.write_mode.value,
            "unique_key": list(spec.unique_key),
            "schedule": spec.schedule,
            "deprecated": [list(d) for d in spec.deprecated],
            "checks": [[c.name, c.kind, c.severity.value, dict(c.params)] for c in spec.checks],
            "upstream": list(spec.upstream),
            "sources": list(spec.sources),
            "reconciliations": [
                [r.name, r.source, r.source_expression, r.target_expression, r.tolerance]
                for r in spec.reconciliations
            ],
        },
        sort_keys=True,
    )


def spec_from_json(text: str) -> ModelSpec:
    data: dict[str, Any] = json.loads(text)
    return ModelSpec(
        name=data["name"],
        path=data["path"],
        sql=data["sql"],
        grain=Grain(data["grain"]),
        partition_column=data["partition_column"],
        columns=tuple(Column(n, t, bool(nullable)) for n, t, nullable in data["columns"]),
        start=data["start"],
        keys=tuple(data["keys"]),
        write_mode=WriteMode(data["write_mode"]),
        unique_key=tuple(data["unique_key"]),
        schedule=data["schedule"],
        deprecated=tuple((c, d) for c, d in data.get("deprecated", [])),
        checks=tuple(
            CheckSpec(name, kind, Severity(severity), params)
            for name, kind, severity, params in data["checks"]
        ),
        upstream=tuple(data["upstream"]),
        sources=tuple(data["sources"]),
        reconciliations=tuple(Reconciliation(*r) for r in data.get("reconciliations", [])),
    )


def version_row(version: Version) -> tuple[Any, ...]:
    return (
        version.version_id,
        version.model,
        version.seq,
        version.fingerprint,
        version.sql,
        spec_to_json(version.spec),
        json.dumps(dict(version.upstream_fingerprints), sort_keys=True),
        version.git_commit,
        int(version.git_dirty),
        json.dumps(dict(version.tool_versions), sort_keys=True),
        version.change.value,
        version.created_at,
    )


def version_from_row(row: Any) -> Version:
    return Version(
        version_id=row["version_id"],
        model=row["model"],
        seq=row["seq"],
        fingerprint=row["fingerprint"],
        sql=row["sql_text"],
        spec=spec_from_json(row["spec"]),
        upstream_fingerprints=json.loads(row["upstream"]),
        git_commit=row["git_commit"],
        git_dirty=bool(row["git_dirty"]),
        tool_versions=json.loads(row["tool_versions"]),
        created_at=row["created_at"],
        change=ChangeKind(row["change"]),
    )
