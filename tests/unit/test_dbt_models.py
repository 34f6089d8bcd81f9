"""dbt's manifest as tidegate models, without dbt or a warehouse: partitioning, the windows of
the compiled SELECT, sources, contracts, tests as checks, and what stays dbt's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tidegate.dbt.manifest import read_manifest
from tidegate.dbt.models import DbtModelProblem, DbtProject, Warehouse, dbt_project
from tidegate.dbt.relations import Target, rewrite
from tidegate.domain.model import Column, ModelSpec, Source
from tidegate.domain.partitions import Grain
from tidegate.sql.model_sql import parameters, parse_query

WAREHOUSE = Warehouse("w", "main")
DESCRIBED = (Column("id", "INT"), Column("at", "TIMESTAMP"), Column("amount", "DECIMAL(18, 2)"))


def model(name: str, sql: str, *, depends: tuple[str, ...] = (), **config: Any) -> dict[str, Any]:
    materialized = config.pop("materialized", "table")
    columns = config.pop("columns", {})
    return {
        "resource_type": "model",
        "name": name,
        "alias": name,
        "database": "w",
        "schema": config.pop("schema", "main"),
        "original_file_path": f"models/{name}.sql",
        "language": config.pop("language", "sql"),
        "compiled_code": sql,
        "checksum": {"name": "sha256", "checksum": f"sum-{name}"},
        "depends_on": {"nodes": list(depends), "macros": config.pop("macros", [])},
        "columns": columns,
        "config": {"materialized": materialized, **config},
    }


def source(name: str, **config: Any) -> dict[str, Any]:
    loaded_at = config.pop("loaded_at_field", None)
    return {
        "source_name": "raw",
        "name": name,
        "identifier": name,
        "database": "w",
        "schema": "raw",
        "loaded_at_field": loaded_at,
        "config": config,
    }


def dbt_test(
    name: str, attached: str | None, generic: str | None, sql: str = "", **kwargs: Any
) -> dict[str, Any]:
    depends = kwargs.pop("depends", [attached] if attached else [])
    severity = kwargs.pop("severity", "ERROR")
    return {
        "resource_type": "test",
        "name": name,
        "original_file_path": "models/schema.yml",
        "test_metadata": {"name": generic, "kwargs": kwargs, "namespace": None}
        if generic
        else None,
        "attached_node": attached,
        "depends_on": {"nodes": depends},
        "config": {"severity": severity},
        "compiled_code": sql,
    }


def manifest(
    nodes: Mapping[str, dict[str, Any]], sources: Mapping[str, dict[str, Any]]
) -> dict[str, Any]:
    return {
        "metadata": {"dbt_version": "1.11.16", "adapter_type": "duckdb"},
        "nodes": dict(nodes),
        "sources": dict(sources),
        "macros": {
            "macro.p.cents": {"macro_sql": "{% macro cents(c) %}{{ c }} / 100{% endmacro %}"}
        },
    }


def project(data: dict[str, Any]) -> DbtProject:
    def describe(
        spec: ModelSpec, upstream: Mapping[str, tuple[Column, ...]], sources: Mapping[str, Source]
    ) -> tuple[Column, ...]:
        return DESCRIBED

    return dbt_project(
        read_manifest(data),
        "analytics",
        "duckdb 1.11.1",
        WAREHOUSE,
        set(),
        describe,
        lambda n: n == "status",
    )


SOURCES = {
    "source.p.raw.events": source("events", event_time="at"),
    "source.p.raw.people": source("people"),
}


def test_event_time_partitions_and_windows_what_has_an_event_time() -> None:
    nodes = {
        "model.p.stg": model(
            "stg",
            'select * from "w"."raw"."events"',
            depends=("source.p.raw.events",),
            materialized="view",
            event_time="at",
        ),
        "model.p.daily": model(
            "daily",
            'select e.id, e.at, e.amount from "w"."main"."stg" e '
            'join "w"."raw"."people" p on p.id = e.id',
            depends=("model.p.stg",),
            materialized="incremental",
            incremental_strategy="microbatch",
            event_time="at",
            batch_size="month",
            begin="2025-01-01T00:00:00",
        ),
        "model.p.everything": model(
            "everything", 'select * from "w"."main"."daily"', depends=("model.p.daily",)
        ),
    }
    found = project(manifest(nodes, SOURCES))
    stg, daily, everything = (found.models[n] for n in ("stg", "daily", "everything"))
    assert (stg.grain, stg.partition_column, stg.start) == (Grain.DAY, "at", None)
    assert (daily.grain, daily.start) == (Grain.MONTH, "2025-01")
    assert everything.grain is Grain.TABLE and everything.keys == ("all",)
    # the windowed upstream is filtered, the dateless source read whole
    assert parameters(parse_query(daily.sql)) == {"start", "end"}
    assert '"at" >= $start AND "at" < $end' in daily.sql and "JOIN raw_people AS p" in daily.sql
    assert daily.upstream == ("stg",) and daily.sources == ("raw_people",)
    # a whole-table model reads everything whole
    assert parameters(parse_query(everything.sql)) == set()
    assert (
        found.sources["raw_people"].time_column == ""
        and found.sources["raw_events"].table == "raw.events"
    )
    assert (
        daily.dbt is not None
        and daily.dbt.node_id == "model.p.daily"
        and daily.dbt.dbt_version == "1.11.16"
    )


def test_what_tidegate_leaves_to_dbt_is_listed_and_readable_as_a_source() -> None:
    nodes = {
        "seed.p.codes": {**model("codes", ""), "resource_type": "seed"},
        "model.p.py": model("py", "", language="python"),
        "model.p.elsewhere": model("elsewhere", "select 1 as id", schema="marts"),
        "model.p.status": model("status", "select 1 as id"),
        "model.p.mv": model("mv", "select 1 as id", materialized="materialized_view"),
        "model.p.reader": model(
            "reader", 'select * from "w"."main"."codes"', depends=("seed.p.codes",)
        ),
        "model.p.orphan": model("orphan", 'select * from "w"."nowhere"."thing"'),
    }
    found = project(manifest(nodes, SOURCES))
    left = {item.node: item.reason for item in found.left_to_dbt}
    assert set(left) == {"codes", "py", "elsewhere", "status", "mv", "orphan"}
    assert (
        "a seed" in left["codes"]
        and "python" in left["py"]
        and "main_marts" not in left["elsewhere"]
    )
    assert "reserved" in left["status"] and "w.nowhere.thing" in left["orphan"]
    assert found.models["reader"].sources == ("codes",)
    assert set(found.models) == {"reader"}


def test_a_contract_gives_the_columns_and_tests_become_checks() -> None:
    columns = {
        "id": {"data_type": "integer", "constraints": [{"type": "not_null"}]},
        "at": {"data_type": "timestamp", "constraints": []},
        "kind": {"data_type": "text", "constraints": []},
    }
    nodes = {
        "model.p.people": model("people_model", 'select * from "w"."raw"."people"'),
        "model.p.facts": model(
            "facts",
            'select id, at, kind from "w"."raw"."events"',
            event_time="at",
            contract={"enforced": True},
            columns=columns,
        ),
        "model.p.later": model(
            "later", 'select * from "w"."main"."facts"', depends=("model.p.facts",)
        ),
        "test.p.u": dbt_test("unique_facts_id", "model.p.facts", "unique", column_name="id"),
        "test.p.a": dbt_test(
            "accepted",
            "model.p.facts",
            "accepted_values",
            column_name="kind",
            values=["a", "b"],
            severity="warn",
        ),
        "test.p.r": dbt_test(
            "rel",
            "model.p.facts",
            "relationships",
            column_name="id",
            to="ref('people_model')",
            field="id",
            depends=["model.p.people", "model.p.facts"],
        ),
        "test.p.down": dbt_test(
            "rel_down",
            "model.p.facts",
            "relationships",
            column_name="id",
            to="ref('later')",
            field="id",
            depends=["model.p.later", "model.p.facts"],
        ),
        "test.p.s": dbt_test(
            "no_negative",
            None,
            None,
            'select id from "w"."main"."facts" where id < 0',
            depends=["model.p.facts"],
        ),
        "test.p.gone": dbt_test("not_a_column", "model.p.facts", "not_null", column_name="nope"),
    }
    found = project(manifest(nodes, SOURCES))
    facts = found.models["facts"]
    assert [(c.name, c.type, c.nullable) for c in facts.columns] == [
        ("id", "INT", False),
        ("at", "TIMESTAMP", True),
        ("kind", "TEXT", True),
    ]
    checks = {c.name: c for c in facts.checks}
    assert checks["unique_facts_id"].kind == "unique"
    assert checks["accepted"].severity.value == "warn"
    assert checks["rel"].kind == "relationships" and checks["rel"].params["to"] == "people_model"
    singular = checks["no_negative"]
    assert singular.kind == "query" and "FROM this AS facts" in singular.params["sql"]
    # it returns no partition column: its failing rows fail every partition of the batch
    assert 'CAST(NULL AS TIMESTAMP) AS "at"' in singular.params["sql"]
    not_run = {item.node: item.reason for item in found.tests_not_run}
    assert set(not_run) == {"rel_down", "not_a_column"}
    assert "computed from facts" in not_run["rel_down"]


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"grain": "week", "time_column": "at"}, "grain 'week'"),
        ({"grain": "day"}, "name the time column"),
        ({"grain": "day", "time_column": "id"}, "is INT, not a DATE or TIMESTAMP"),
        ({"grain": "day", "time_column": "at", "start": "yesterday"}, "start:"),
        ({"grian": "day"}, "meta.tidegate.grian: unknown key"),
    ],
)
def test_a_model_tidegate_cannot_partition_as_declared_is_refused(
    meta: dict[str, Any], message: str
) -> None:
    nodes = {"model.p.m": model("m", 'select * from "w"."raw"."events"', meta={"tidegate": meta})}
    with pytest.raises(DbtModelProblem, match=r"models/m\.sql: dbt model m: ") as raised:
        project(manifest(nodes, SOURCES))
    assert message in str(raised.value)


def test_relations_in_an_inlined_ephemeral_model_are_read_whole() -> None:
    targets = {("w", "main", "pay"): Target("pay", "at"), ("w", "main", "ord"): Target("ord", "at")}
    compiled = (
        'with __dbt__cte__eph as (select * from "w"."main"."pay"), '
        'o as (select * from "w"."main"."ord") '
        "select * from o join __dbt__cte__eph using (id)"
    )
    done = rewrite(compiled, "duckdb", targets, windowed=True)
    assert "FROM pay AS pay" in done.sql
    assert 'FROM (SELECT * FROM ord WHERE "at" >= $start AND "at" < $end) AS ord' in done.sql
    assert done.reads == {"pay", "ord"} and done.unknown == ()


def test_a_target_building_into_another_database_is_refused() -> None:
    nodes = {"model.p.m": {**model("m", "select 1 as id"), "database": "elsewhere"}}
    with pytest.raises(DbtModelProblem, match="builds into database elsewhere, the warehouse is w"):
        project(manifest(nodes, SOURCES))


def test_a_model_named_like_a_source_is_left_to_dbt() -> None:
    nodes = {"model.p.raw_people": model("raw_people", "select 1 as id")}
    found = project(manifest(nodes, SOURCES))
    assert [(i.node, i.reason) for i in found.left_to_dbt] == [
        ("raw_people", "its name 'raw_people' is also a source's")
    ]
