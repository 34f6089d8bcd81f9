"""The dependency graph of models: order of execution and cycle detection."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tidegate.domain.errors import UsageError


class CycleError(UsageError):
    def __init__(self, cycle: list[str]) -> None:
        super().__init__(f"models form a cycle: {' -> '.join(cycle)}")
        self.cycle = cycle


def topological_order(upstream: Mapping[str, Sequence[str]]) -> list[str]:
    """Models ordered so each comes after the models it reads; raises UsageError on a cycle.

    `upstream` maps every model to the models it reads (sources are left out).
    """
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            cycle = [*path[path.index(name) :], name]
            raise CycleError(cycle)
        state[name] = "visiting"
        for parent in sorted(upstream.get(name, ())):
            visit(parent, [*path, name])
        state[name] = "done"
        order.append(name)

    for model in sorted(upstream):
        visit(model, [])
    return order


def downstream_of(upstream: Mapping[str, Sequence[str]], model: str) -> list[str]:
    """Every model that reads `model`, directly or through others, in execution order."""
    reached = {model}
    for name in topological_order(upstream):
        if any(parent in reached for parent in upstream.get(name, ())):
            reached.add(name)
    return [m for m in topological_order(upstream) if m in reached and m != model]
