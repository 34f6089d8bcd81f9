"""The columns of a dbt model without an enforced contract: its SELECT described by the
warehouse's planner at build (nothing runs), each upstream model read as an empty relation of
the columns found for it, so no table need exist but the sources. Kept per query under
`.tidegate/dbt/columns.json`: the version records them, and the audit enforces them."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from sqlglot import exp

from tidegate.dbt.models import DbtModelProblem
from tidegate.domain.errors import EngineError
from tidegate.domain.model import Column, ModelSpec, Source
from tidegate.domain.partitions import Grain
from tidegate.engines.base import Engine, bound_values
from tidegate.sql.model_sql import DIALECT, parse_query, render

_SAMPLE = {Grain.HOUR: "2000-01-01T00", Grain.DAY: "2000-01-01", Grain.MONTH: "2000-01"}


class Describer:
    """Describes models' columns with one engine, opened on first need."""

    def __init__(self, open_engine: Callable[[Mapping[str, Source]], Engine], cache: Path) -> None:
        self._open = open_engine
        self._engine: Engine | None = None
        self._cache_path = cache
        self._cache: dict[str, list[list[str]]] = _read(cache)
        self._used: dict[str, list[list[str]]] = {}

    def __call__(
        self,
        spec: ModelSpec,
        upstream: Mapping[str, tuple[Column, ...]],
        sources: Mapping[str, Source],
    ) -> tuple[Column, ...]:
        sql = described_sql(spec, upstream, sources)
        key = hashlib.sha256(sql.encode()).hexdigest()
        found = self._cache.get(key)
        if found is None:
            if self._engine is None:
                self._engine = self._open(sources)
            partition = spec.first_partition() or spec.parse_partition(_SAMPLE[spec.grain])
            try:
                planned = self._engine.query_columns(
                    sql, bound_values(partition, partition.label(spec.keys))
                )
            except EngineError as error:
                raise DbtModelProblem(
                    f"{spec.path}: dbt model {spec.name}: its columns cannot be described "
                    f"({str(error).splitlines()[0]}); create its sources first, or declare its "
                    "columns in an enforced dbt contract"
                ) from None
            found = [[c.name, c.type] for c in planned]
        self._used[key] = found
        return tuple(Column(name, type_) for name, type_ in found)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        if self._used != self._cache:
            temporary = self._cache_path.with_suffix(".tmp")
            temporary.write_text(json.dumps(self._used, sort_keys=True))
            os.replace(temporary, self._cache_path)


def _read(path: Path) -> dict[str, list[list[str]]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def described_sql(
    spec: ModelSpec, upstream: Mapping[str, tuple[Column, ...]], sources: Mapping[str, Source]
) -> str:
    """The model's SELECT with each upstream model an empty relation of its columns, and each
    source its table."""

    def empty(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Table) or node.args.get("db") or node.name not in upstream:
            return node
        columns = [
            exp.cast(exp.null(), c.type).as_(c.name, quoted=True) for c in upstream[node.name]
        ]
        nothing = exp.select(*columns).where(exp.false())
        alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
        return exp.Subquery(this=nothing, alias=alias)

    query = parse_query(spec.sql).transform(empty)
    physical = {name: sources[name].table for name in spec.sources}
    return render(parse_query(query.sql(dialect=DIALECT)), physical)
