"""dbt's tests on a model as the model's tidegate checks, run on each batch's staged rows
before publish: `unique`, `not_null` and `accepted_values` as tidegate's own checks,
`relationships` against the referenced model or source as published, and every other test
(singular ones, other generic ones) as a query check: its compiled SELECT of failing rows,
reading the staged rows where it read the model. `severity: warn` warns; any other blocks."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

import sqlglot
from sqlglot import exp

from tidegate.dbt.manifest import LeftToDbt, Manifest, Node, Test
from tidegate.dbt.relations import CompiledSqlProblem, Target, rewrite
from tidegate.domain.model import CheckSpec, ModelSpec, Severity
from tidegate.sql.model_sql import DIALECT, SqlProblem
from tidegate.sql.statements import query_check_problem, relationships_sql

NATIVE = frozenset({"unique", "not_null", "accepted_values"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class TestPlan:
    """Which model each test checks: a generic test's own, a singular test's most downstream
    controlled model among those it reads."""

    def __init__(
        self,
        manifest: Manifest,
        controlled: Mapping[str, Node],
        dependencies: Mapping[str, tuple[str, ...]],
        names: Mapping[str, str],
    ) -> None:
        self.controlled = controlled
        # each dbt node or source tidegate reads (by unique id) → its tidegate model or source
        self.names = names
        self.upstream = {uid: _closure(uid, dependencies) for uid in controlled}
        self.tests: dict[str, list[Test]] = {}
        self.orphans: list[Test] = []
        for test in manifest.tests:
            owner = self._owner(test)
            if owner is None:
                self.orphans.append(test)
            else:
                self.tests.setdefault(owner, []).append(test)

    def _owner(self, test: Test) -> str | None:
        if test.attached is not None:
            return test.attached if test.attached in self.controlled else None
        models = [d for d in test.depends_on if d in self.controlled]
        for uid in models:
            if all(other in self.upstream[uid] for other in models if other != uid):
                return uid
        return None

    def downstream_of(self, uid: str, other: str) -> bool:
        """Whether `other` is computed from `uid` (or is it)."""
        return other == uid or uid in self.upstream.get(other, set())


def _closure(uid: str, dependencies: Mapping[str, tuple[str, ...]]) -> set[str]:
    seen: set[str] = set()
    todo = list(dependencies.get(uid, ()))
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(dependencies.get(current, ()))
    return seen


def checks_of(
    plan: TestPlan,
    node: Node,
    spec: ModelSpec,
    targets: Mapping[tuple[str, str, str], Target],
    dialect: str,
) -> tuple[tuple[CheckSpec, ...], list[LeftToDbt]]:
    """The model's checks from its dbt tests, and the tests tidegate does not run, with why."""
    checks: list[CheckSpec] = []
    skipped: list[LeftToDbt] = []
    names: set[str] = set()
    columns = {c.name for c in spec.columns}
    for test in plan.tests.get(node.unique_id, ()):
        severity = Severity.WARN if test.severity == "warn" else Severity.BLOCKING
        try:
            kind, params = _check(plan, node, spec, test, targets, dialect, columns)
        except _NotRun as reason:
            skipped.append(LeftToDbt(test.name, str(reason)))
            continue
        name = _name(test.name, names)
        names.add(name)
        checks.append(CheckSpec(name, kind, severity, params))
    return tuple(checks), skipped


class _NotRun(Exception):
    pass


def _check(
    plan: TestPlan,
    node: Node,
    spec: ModelSpec,
    test: Test,
    targets: Mapping[tuple[str, str, str], Target],
    dialect: str,
    columns: set[str],
) -> tuple[str, dict[str, object]]:
    if test.unsupported:
        raise _NotRun(f"{', '.join(test.unsupported)}: tidegate fails a check on any row")
    column = test.kwargs.get("column_name")
    plain = test.namespace is None and not test.kwargs.get("where")
    # on an expression rather than a column, the test's own compiled SELECT runs
    if plain and test.generic in NATIVE and isinstance(column, str) and column in columns:
        if test.generic == "accepted_values":
            values = test.kwargs.get("values")
            if test.kwargs.get("quote", True) and isinstance(values, list) and values:
                return "accepted_values", {"column": column, "values": list(values)}
        else:
            return test.generic, {"columns": [column]}
    if plain and test.generic == "relationships" and isinstance(column, str) and column in columns:
        return "relationships", _relationships(plan, node, test, column)
    return "query", {"sql": _query(plan, node, spec, test, targets, dialect)}


def _relationships(plan: TestPlan, node: Node, test: Test, column: str) -> dict[str, object]:
    field = test.kwargs.get("field")
    parents = [d for d in test.depends_on if d != node.unique_id]
    if not isinstance(field, str) or len(parents) != 1:
        raise _NotRun("not a relationships test tidegate can read (column, to and field)")
    parent = parents[0]
    if parent in plan.controlled and plan.downstream_of(node.unique_id, parent):
        raise _NotRun(
            f"relationships to {plan.controlled[parent].name}, which is computed from "
            f"{node.name}: dbt checks it once both are built"
        )
    to = plan.names.get(parent)
    if to is None:
        raise _NotRun(f"relationships to {parent}, which tidegate does not read")
    return {
        "column": column,
        "to": to,
        "field": field,
        "sql": relationships_sql(column, to, field),
    }


def _query(
    plan: TestPlan,
    node: Node,
    spec: ModelSpec,
    test: Test,
    targets: Mapping[tuple[str, str, str], Target],
    dialect: str,
) -> str:
    """The test's compiled SELECT of failing rows over the staged rows (`this`); a SELECT that
    does not return the partition column fails every partition of the batch."""
    if node.relation is None:
        raise _NotRun("the model has no relation")
    try:
        rewritten = rewrite(test.compiled_sql, dialect, targets, False, this=node.relation.key)
    except CompiledSqlProblem as unreadable:
        raise _NotRun(f"its compiled SQL {unreadable}") from None
    if rewritten.unknown:
        raise _NotRun(f"reads {', '.join(rewritten.unknown)}, which dbt does not build")
    for uid, read in plan.controlled.items():
        if read.name in rewritten.reads and plan.downstream_of(node.unique_id, uid):
            raise _NotRun(f"reads {read.name}, which is computed from {node.name}")
    sql = _returning_partition(rewritten.sql, spec)
    problem = query_check_problem(sql, spec.partition_column, rewritten.reads)
    if problem is not None:
        raise _NotRun(f"its compiled SQL {problem}")
    return sql


def _returning_partition(sql: str, spec: ModelSpec) -> str:
    query = sqlglot.parse_one(sql, dialect=DIALECT)
    if not isinstance(query, exp.Query):
        raise SqlProblem("not a SELECT")
    returned = {s.alias_or_name for s in query.selects}
    if not spec.partition_column or "*" in returned or spec.partition_column in returned:
        return sql
    column_type = next(c.type for c in spec.columns if c.name == spec.partition_column)
    unattributed = exp.cast(exp.null(), column_type).as_(spec.partition_column, quoted=True)
    wrapped = exp.select(unattributed).from_(query.subquery("failures"))
    return wrapped.sql(dialect=DIALECT)


def _name(wanted: str, taken: set[str]) -> str:
    """A check name: the test's, shortened to an identifier when dbt's is longer."""
    name = wanted if _NAME.match(wanted) else _shortened(wanted)
    while name in taken:
        name = _shortened(name + "_")
    return name


def _shortened(name: str) -> str:
    plain = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not plain or plain[0].isdigit():
        plain = f"t_{plain}"
    return f"{plain[:50]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"
