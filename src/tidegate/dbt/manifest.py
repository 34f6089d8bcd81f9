"""The parts of dbt's manifest.json that tidegate reads, as plain values (dbt-core 1.8–1.11)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LeftToDbt:
    """A node (or test) tidegate leaves to dbt, and why."""

    node: str
    reason: str


@dataclass(frozen=True)
class Relation:
    """Where a node's rows are: database, schema and identifier, as dbt resolved them."""

    database: str
    schema: str
    identifier: str

    @property
    def key(self) -> tuple[str, str, str]:
        """How a compiled query names it, case folded as unquoted identifiers are."""
        return (self.database.lower(), self.schema.lower(), self.identifier.lower())

    def shown(self) -> str:
        return f"{self.database}.{self.schema}.{self.identifier}"


@dataclass(frozen=True)
class Node:
    """A model, seed or snapshot of the project."""

    unique_id: str
    resource_type: str  # model | seed | snapshot
    name: str
    path: str  # relative to the dbt project
    relation: Relation | None  # None: ephemeral
    materialized: str
    language: str
    compiled_sql: str
    checksum: str
    macros: tuple[str, ...]
    depends_on: tuple[str, ...]
    event_time: str | None
    batch_size: str | None
    begin: str | None
    contract: bool
    # column → (data_type or None, NOT NULL)
    columns: Mapping[str, tuple[str | None, bool]]
    tidegate: Mapping[str, Any]  # meta.tidegate

    @property
    def time_column(self) -> str | None:
        """The column placing its rows in time: meta.tidegate's, else its event_time."""
        found: str | None = self.tidegate.get("time_column") or self.event_time
        return found


@dataclass(frozen=True)
class SourceTable:
    unique_id: str
    source_name: str
    name: str
    relation: Relation
    time_column: str | None  # config.event_time, or loaded_at_field
    tidegate: Mapping[str, Any]


@dataclass(frozen=True)
class Test:
    unique_id: str
    name: str
    generic: str | None  # unique | not_null | accepted_values | relationships | …; None: singular
    namespace: str | None
    kwargs: Mapping[str, Any]
    attached: str | None  # the model a generic test is declared on
    depends_on: tuple[str, ...]
    severity: str  # "warn" or "error"
    compiled_sql: str
    # settings tidegate does not judge by (store_failures, thresholds, limit)
    unsupported: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    dbt_version: str
    adapter_type: str
    nodes: Mapping[str, Node]
    sources: Mapping[str, SourceTable]
    tests: tuple[Test, ...]
    macro_digests: Mapping[str, str]


def read_manifest(data: Mapping[str, Any]) -> Manifest:
    metadata = data.get("metadata", {})
    nodes: dict[str, Node] = {}
    tests: list[Test] = []
    for unique_id, raw in data.get("nodes", {}).items():
        kind = raw.get("resource_type")
        if kind in ("model", "seed", "snapshot"):
            nodes[unique_id] = _node(unique_id, raw)
        elif kind == "test":
            tests.append(_test(unique_id, raw))
    sources = {
        unique_id: _source(unique_id, raw) for unique_id, raw in data.get("sources", {}).items()
    }
    macros = {
        unique_id: hashlib.sha256(str(raw.get("macro_sql", "")).encode()).hexdigest()
        for unique_id, raw in data.get("macros", {}).items()
    }
    return Manifest(
        dbt_version=str(metadata.get("dbt_version", "unknown")),
        adapter_type=str(metadata.get("adapter_type", "unknown")),
        nodes=nodes,
        sources=sources,
        tests=tuple(sorted(tests, key=lambda t: t.unique_id)),
        macro_digests=macros,
    )


def _config(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    config: Mapping[str, Any] = raw.get("config") or {}
    return config


def _meta(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """meta.tidegate, from the node's meta or its config's (dbt keeps both)."""
    for meta in (_config(raw).get("meta") or {}, raw.get("meta") or {}):
        found = meta.get("tidegate")
        if isinstance(found, Mapping):
            return found
    return {}


def _relation(raw: Mapping[str, Any], identifier_key: str) -> Relation:
    return Relation(
        str(raw.get("database") or ""),
        str(raw.get("schema") or ""),
        str(raw.get(identifier_key) or raw.get("name") or ""),
    )


def _node(unique_id: str, raw: Mapping[str, Any]) -> Node:
    config = _config(raw)
    materialized = str(config.get("materialized") or "")
    columns = {
        name: (
            column.get("data_type") or None,
            any(c.get("type") == "not_null" for c in column.get("constraints") or ()),
        )
        for name, column in (raw.get("columns") or {}).items()
    }
    contract = config.get("contract") or {}
    return Node(
        unique_id=unique_id,
        resource_type=str(raw.get("resource_type")),
        name=str(raw.get("name")),
        path=str(raw.get("original_file_path") or raw.get("path") or ""),
        relation=None if materialized == "ephemeral" else _relation(raw, "alias"),
        materialized=materialized,
        language=str(raw.get("language") or "sql"),
        compiled_sql=str(raw.get("compiled_code") or raw.get("compiled_sql") or ""),
        checksum=str((raw.get("checksum") or {}).get("checksum", "")),
        macros=tuple(sorted((raw.get("depends_on") or {}).get("macros") or ())),
        depends_on=tuple((raw.get("depends_on") or {}).get("nodes") or ()),
        event_time=config.get("event_time") or None,
        batch_size=config.get("batch_size") or None,
        begin=None if config.get("begin") is None else str(config["begin"]),
        contract=bool(contract.get("enforced")),
        columns=columns,
        tidegate=_meta(raw),
    )


def _source(unique_id: str, raw: Mapping[str, Any]) -> SourceTable:
    config = _config(raw)
    loaded_at = raw.get("loaded_at_field") or config.get("loaded_at_field")
    return SourceTable(
        unique_id=unique_id,
        source_name=str(raw.get("source_name")),
        name=str(raw.get("name")),
        relation=_relation(raw, "identifier"),
        time_column=config.get("event_time") or loaded_at or None,
        tidegate=_meta(raw),
    )


def _test(unique_id: str, raw: Mapping[str, Any]) -> Test:
    config = _config(raw)
    metadata = raw.get("test_metadata") or {}
    unsupported = [
        f"{key} = {config[key]!r}"
        for key, default in (
            ("fail_calc", "count(*)"),
            ("warn_if", "!= 0"),
            ("error_if", "!= 0"),
            ("limit", None),
        )
        if config.get(key, default) != default
    ]
    return Test(
        unique_id=unique_id,
        name=str(raw.get("name")),
        generic=metadata.get("name") or None,
        namespace=metadata.get("namespace") or None,
        kwargs=metadata.get("kwargs") or {},
        attached=raw.get("attached_node") or None,
        depends_on=tuple((raw.get("depends_on") or {}).get("nodes") or ()),
        severity="warn" if str(config.get("severity", "error")).lower() == "warn" else "error",
        compiled_sql=str(raw.get("compiled_code") or raw.get("compiled_sql") or ""),
        unsupported=tuple(unsupported),
    )
