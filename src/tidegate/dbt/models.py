"""Every model of a dbt project as a tidegate SQL model, from dbt's manifest (pure: the
columns of models without an enforced contract come from `describe`).

- A model declaring dbt's `event_time` is partitioned by its `batch_size` (as dbt microbatch
  does), or by day without one; `meta: {tidegate: {grain: …, time_column: …}}` says so for any
  model (`grain: table` keeps one with an event time whole); any other is a whole-table model
  (one partition, `all`).
- Its compiled SELECT reads tidegate's relations, each with an event time filtered to the
  partition's window (relations.py).
- Sources are the project's `sources:` (read per window when they name an event time or a
  `loaded_at_field`, whole otherwise), and the relations of what stays dbt's (seeds,
  snapshots, Python models, other materializations).
- dbt's tests on a model become its checks (tests.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from tidegate.dbt.manifest import LeftToDbt, Manifest, Node, Relation
from tidegate.dbt.relations import CompiledSqlProblem, Target, rewrite
from tidegate.dbt.tests import TestPlan, checks_of
from tidegate.domain.errors import UsageError
from tidegate.domain.graph import CycleError, topological_order
from tidegate.domain.model import Column, DbtOrigin, ModelSpec, Source
from tidegate.domain.partitions import WHOLE_LABEL, Grain, parse_partition
from tidegate.project.config import IDENTIFIER
from tidegate.sql.model_sql import SqlProblem, parse_query, parse_type
from tidegate.sql.statements import is_time_type

CONTROLLED = frozenset({"table", "view", "incremental"})
# what `meta: {tidegate: {...}}` may say of a model
META_KEYS = frozenset({"grain", "time_column", "start", "min_rows"})
GRAINS = {"hour": Grain.HOUR, "day": Grain.DAY, "month": Grain.MONTH}
_START_LENGTHS = {Grain.HOUR: 13, Grain.DAY: 10, Grain.MONTH: 7}


@dataclass(frozen=True)
class DbtProject:
    """What tidegate made of a dbt project."""

    folder: str  # relative to the tidegate project
    dbt_version: str
    adapter: str
    models: dict[str, ModelSpec]
    sources: dict[str, Source]
    left_to_dbt: tuple[LeftToDbt, ...]
    tests_not_run: tuple[LeftToDbt, ...]
    inlined: tuple[str, ...]  # ephemeral models, inlined into their readers by dbt


@dataclass(frozen=True)
class Warehouse:
    """Where tidegate publishes: the database and schema dbt's target must build into."""

    database: str
    schema: str

    def holds(self, relation: Relation) -> bool:
        return (relation.database.lower(), relation.schema.lower()) == (
            self.database.lower(),
            self.schema.lower(),
        )


# the columns a model's SELECT produces, given the columns of each upstream model
Describe = Callable[
    [ModelSpec, Mapping[str, tuple[Column, ...]], Mapping[str, Source]], tuple[Column, ...]
]


class DbtModelProblem(UsageError):
    """A dbt node tidegate cannot control as it is, named with its file."""


def dbt_project(
    manifest: Manifest,
    folder: str,
    adapter: str,
    warehouse: Warehouse,
    taken: set[str],
    describe: Describe,
    reserved: Callable[[str], bool],
) -> DbtProject:
    """`taken`: the names of tidegate.toml's own sources; `reserved`: names no model may have."""
    left: list[LeftToDbt] = []
    _refuse_other_database(manifest, warehouse)
    sources = _sources(manifest, warehouse, taken)
    controlled: dict[str, Node] = {}
    for node in manifest.nodes.values():
        if node.materialized == "ephemeral" and node.resource_type == "model":
            continue  # dbt inlines it into its readers
        reason = _left_reason(node, warehouse, reserved)
        if reason is None and (node.name in sources or node.name in taken):
            reason = f"its name {node.name!r} is also a source's"
        if reason is None:
            controlled[node.unique_id] = node
            continue
        left.append(LeftToDbt(node.name, reason))
        if (
            node.relation is not None
            and warehouse.holds(node.relation)
            and IDENTIFIER.match(node.name)
            and node.name not in sources
            and node.name not in taken
        ):
            sources[node.name] = Source(
                node.name, _physical(node.relation, warehouse), node.event_time or ""
            )
    targets = _targets(manifest, controlled, sources, warehouse)
    dependencies = {
        uid: _model_inputs(manifest, node, controlled) for uid, node in controlled.items()
    }
    try:
        order = topological_order(dependencies)
    except CycleError as error:
        raise DbtModelProblem(f"dbt models depend on each other in a cycle: {error}") from None
    models: dict[str, ModelSpec] = {}
    columns: dict[str, tuple[Column, ...]] = {}
    names = {
        uid: targets[n.relation.key].name
        for uid, n in manifest.nodes.items()
        if n.relation is not None and n.relation.key in targets
    }
    names.update({uid: targets[s.relation.key].name for uid, s in manifest.sources.items()})
    plan = TestPlan(manifest, controlled, dependencies, names)
    not_run: list[LeftToDbt] = []
    for uid in order:
        node = controlled[uid]
        spec = _model(node, folder, manifest, adapter, targets, sources, models, left)
        if spec is None:
            continue
        found = _contract(node, spec.path) if node.contract else None
        spec = _with_columns(spec, found or describe(spec, columns, sources), node)
        checks, skipped = checks_of(plan, node, spec, targets, manifest.adapter_type)
        not_run += skipped
        spec = replace(spec, checks=checks)
        models[spec.name], columns[spec.name] = spec, spec.columns
    not_run += [
        LeftToDbt(
            t.name, "reads no model tidegate controls, or several none computed from the rest"
        )
        for t in plan.orphans
    ]
    inlined = sorted(n.name for n in manifest.nodes.values() if n.materialized == "ephemeral")
    return DbtProject(
        folder,
        manifest.dbt_version,
        adapter,
        models,
        sources,
        tuple(sorted(left, key=lambda item: item.node)),
        tuple(not_run),
        tuple(inlined),
    )


def _refuse_other_database(manifest: Manifest, warehouse: Warehouse) -> None:
    """The target must build into the warehouse: when no model does, it is another target."""
    databases = {
        n.relation.database
        for n in manifest.nodes.values()
        if n.relation is not None and n.resource_type == "model"
    }
    if databases and warehouse.database.lower() not in {d.lower() for d in databases}:
        raise DbtModelProblem(
            f"the dbt target builds into database {', '.join(sorted(databases))}, the warehouse "
            f"is {warehouse.database}: point [warehouse] at the target's database, or choose "
            "the target that builds into the warehouse (dbt.target)"
        )


def _model_inputs(
    manifest: Manifest, node: Node, controlled: Mapping[str, Node]
) -> tuple[str, ...]:
    """The controlled models a model reads, through the ephemeral models dbt inlines."""
    found: set[str] = set()
    todo = list(node.depends_on)
    while todo:
        current = todo.pop()
        if current in controlled:
            found.add(current)
        elif current in manifest.nodes and manifest.nodes[current].materialized == "ephemeral":
            todo.extend(manifest.nodes[current].depends_on)
    return tuple(sorted(found))


def _left_reason(node: Node, warehouse: Warehouse, reserved: Callable[[str], bool]) -> str | None:
    """Why tidegate leaves a node to dbt, or None when it controls it."""
    if node.resource_type != "model":
        return f"a {node.resource_type}: tidegate models may read its relation as a source"
    if node.language != "sql":
        return f"a {node.language} model: dbt runs it, it is no SELECT"
    if node.materialized not in CONTROLLED:
        return (
            f"materialized {node.materialized!r}: tidegate publishes tables, views and "
            "incremental models"
        )
    relation = node.relation
    if relation is None:  # ephemeral: never asked
        return "ephemeral"
    if not warehouse.holds(relation):
        return (
            f"builds into {relation.database}.{relation.schema}, not the warehouse's "
            f"{warehouse.database}.{warehouse.schema} (a custom database or schema)"
        )
    if not IDENTIFIER.match(node.name):
        return f"its name {node.name!r} is not a plain identifier (letters, digits and _)"
    if relation.identifier != node.name:
        return f"its alias {relation.identifier!r} differs from its name"
    if reserved(node.name):
        return f"its name {node.name!r} is reserved by tidegate (a subcommand or an id)"
    return None


def _physical(relation: Relation, warehouse: Warehouse) -> str:
    """The table as tidegate names it: qualified by its schema unless it is the warehouse's."""
    if relation.schema.lower() == warehouse.schema.lower():
        return relation.identifier
    return f"{relation.schema}.{relation.identifier}"


def _sources(manifest: Manifest, warehouse: Warehouse, taken: set[str]) -> dict[str, Source]:
    """The dbt project's sources as tidegate's, named SOURCE_TABLE."""
    found: dict[str, Source] = {}
    for source in manifest.sources.values():
        name = f"{source.source_name}_{source.name}"
        if name in found or name in taken:
            raise DbtModelProblem(
                f"dbt source {source.source_name}.{source.name}: tidegate names it {name!r}, "
                "as another source; rename one of them"
            )
        if not IDENTIFIER.match(name):
            raise DbtModelProblem(
                f"dbt source {source.source_name}.{source.name}: tidegate names it {name!r}, "
                "which is not a plain identifier (letters, digits and _)"
            )
        if source.relation.database.lower() != warehouse.database.lower():
            raise DbtModelProblem(
                f"dbt source {source.source_name}.{source.name} is in database "
                f"{source.relation.database}; tidegate reads the warehouse's, "
                f"{warehouse.database}"
            )
        min_rows = _min_rows(source.tidegate, f"dbt source {source.source_name}.{source.name}")
        found[name] = Source(
            name,
            _physical(source.relation, warehouse),
            source.time_column or "",
            min_rows=1 if min_rows is None else min_rows,
        )
    return found


def _targets(
    manifest: Manifest,
    controlled: Mapping[str, Node],
    sources: Mapping[str, Source],
    warehouse: Warehouse,
) -> dict[tuple[str, str, str], Target]:
    """Each relation a compiled query may name, as the tidegate model or source holding it."""
    targets: dict[tuple[str, str, str], Target] = {}
    by_table = {source.table.lower(): source for source in sources.values()}
    for source in manifest.sources.values():
        own = by_table[_physical(source.relation, warehouse).lower()]
        targets[source.relation.key] = Target(own.name, own.time_column or None)
    for node in manifest.nodes.values():
        if node.relation is None:
            continue
        if node.unique_id in controlled:
            targets[node.relation.key] = Target(node.name, node.time_column)
        else:
            held = by_table.get(_physical(node.relation, warehouse).lower())
            if held is not None:
                targets[node.relation.key] = Target(held.name, held.time_column or None)
    return targets


def _partitioning(node: Node) -> tuple[Grain, str, str | None]:
    """(grain, partition column, start) of a model; raises DbtModelProblem."""
    meta = node.tidegate
    unknown = sorted(set(meta) - META_KEYS)
    if unknown:
        raise DbtModelProblem(
            f"meta.tidegate.{unknown[0]}: unknown key (known: {', '.join(sorted(META_KEYS))})"
        )
    column = node.time_column
    # an event time partitions the model: by its microbatch batch size, else by day
    declared = meta.get("grain") or node.batch_size or ("day" if column else None)
    start: str | None = meta.get("start", node.begin)
    if declared is None or declared == "table":
        return Grain.TABLE, "", None
    grain = GRAINS.get(str(declared))
    if grain is None:
        raise DbtModelProblem(
            f"grain {declared!r}: tidegate partitions by hour, day or month, or the whole table"
        )
    if not column:
        raise DbtModelProblem(
            f"grain {declared}: name the time column (meta.tidegate.time_column or event_time)"
        )
    if start is not None:
        start = str(start)[: _START_LENGTHS[grain]].replace(" ", "T")
        try:
            parse_partition(start, grain)
        except UsageError as error:
            raise DbtModelProblem(f"start: {error}") from None
    return grain, str(column), start


def _model(
    node: Node,
    folder: str,
    manifest: Manifest,
    adapter: str,
    targets: Mapping[tuple[str, str, str], Target],
    sources: Mapping[str, Source],
    models: Mapping[str, ModelSpec],
    left: list[LeftToDbt],
) -> ModelSpec | None:
    """The model without its columns and checks; None (and a reason in `left`) when it reads
    what tidegate does not control."""
    path = f"{folder}/{node.path}"
    try:
        grain, partition_column, start = _partitioning(node)
        rewritten = rewrite(node.compiled_sql, manifest.adapter_type, targets, grain.is_time)
        parse_query(rewritten.sql)
    except DbtModelProblem as problem:
        raise DbtModelProblem(f"{path}: dbt model {node.name}: {problem}") from None
    except (CompiledSqlProblem, SqlProblem) as problem:
        left.append(LeftToDbt(node.name, f"its compiled SQL {_message(problem)}"))
        return None
    if rewritten.unknown:
        left.append(
            LeftToDbt(node.name, f"reads {', '.join(rewritten.unknown)}, which dbt does not build")
        )
        return None
    waiting = sorted(r for r in rewritten.reads if r not in sources and r not in models)
    if waiting:
        left.append(LeftToDbt(node.name, f"reads {', '.join(waiting)}, left to dbt"))
        return None
    origin = DbtOrigin(
        node_id=node.unique_id,
        checksum=node.checksum,
        macros=tuple((m, manifest.macro_digests.get(m, "")) for m in node.macros),
        dbt_version=manifest.dbt_version,
        adapter=adapter,
    )
    return ModelSpec(
        name=node.name,
        path=path,
        sql=rewritten.sql,
        grain=grain,
        partition_column=partition_column,
        columns=(),
        start=start,
        keys=(WHOLE_LABEL,) if grain is Grain.TABLE else (),
        upstream=tuple(sorted(r for r in rewritten.reads if r in models)),
        sources=tuple(sorted(r for r in rewritten.reads if r in sources)),
        min_rows=_min_rows(node.tidegate, f"{path}: dbt model {node.name}"),
        whole_reads=tuple(sorted(rewritten.whole)),
        dbt=origin,
    )


def _message(problem: Exception) -> str:
    message = getattr(problem, "message", None) or str(problem)
    return message if message.startswith(("does", "is")) else f"is refused: {message}"


def _min_rows(meta: Mapping[str, Any], what: str) -> int | None:
    """meta.tidegate.min_rows of a model or source (None: not given)."""
    found = meta.get("min_rows")
    if found is not None and (not isinstance(found, int) or isinstance(found, bool) or found < 0):
        raise DbtModelProblem(f"{what}: meta.tidegate.min_rows must be a whole number, 0 or more")
    return found


def _contract(node: Node, path: str) -> tuple[Column, ...]:
    """The columns of an enforced contract, each with its data_type."""
    found = []
    for name, (data_type, not_null) in node.columns.items():
        if data_type is None:
            raise DbtModelProblem(
                f"{path}: dbt model {node.name}: the contract's column {name} has no data_type"
            )
        try:
            found.append(Column(name, parse_type(data_type), not not_null))
        except SqlProblem as problem:
            raise DbtModelProblem(
                f"{path}: dbt model {node.name}: column {name}: {problem.message}"
            ) from None
    return tuple(found)


def _with_columns(spec: ModelSpec, columns: tuple[Column, ...], node: Node) -> ModelSpec:
    if spec.grain.is_time:
        by_name = {c.name: c for c in columns}
        column = by_name.get(spec.partition_column)
        if column is None:
            raise DbtModelProblem(
                f"{spec.path}: dbt model {node.name}: its time column {spec.partition_column!r} "
                f"is not among its columns ({', '.join(by_name)})"
            )
        if not is_time_type(column.type):
            raise DbtModelProblem(
                f"{spec.path}: dbt model {node.name}: its time column {spec.partition_column!r} "
                f"is {column.type}, not a DATE or TIMESTAMP"
            )
    return replace(spec, columns=columns)
