"""The model graph: execution order, cycles named in full, and what lies downstream."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.domain.errors import UsageError
from tidegate.domain.graph import CycleError, downstream_of, topological_order

# The reference pipeline plus a side branch and a model nobody reads.
PIPELINE = {
    "daily_revenue": [],
    "monthly_revenue": ["daily_revenue"],
    "revenue_report": ["monthly_revenue"],
    "daily_audit": ["daily_revenue"],
    "combined": ["daily_audit", "revenue_report"],
    "unrelated": [],
}


def assert_respects_edges(order: list[str], upstream: dict[str, list[str]]) -> None:
    position = {name: index for index, name in enumerate(order)}
    for model, parents in upstream.items():
        for parent in parents:
            assert position[parent] < position[model], f"{parent} must run before {model}"


def test_each_model_comes_after_the_models_it_reads() -> None:
    order = topological_order(PIPELINE)
    assert sorted(order) == sorted(PIPELINE)
    assert len(order) == len(set(order))
    assert_respects_edges(order, PIPELINE)


def test_order_is_deterministic() -> None:
    reordered = dict(reversed(list(PIPELINE.items())))
    assert topological_order(reordered) == topological_order(PIPELINE)


@st.composite
def dags(draw: st.DrawFn) -> dict[str, list[str]]:
    size = draw(st.integers(min_value=1, max_value=12))
    names = [f"m{i}" for i in range(size)]
    shuffled = draw(st.permutations(names))
    # edges only from earlier to later in a random permutation: always acyclic
    return {
        model: sorted(draw(st.sets(st.sampled_from(shuffled[:index]))) if index else [])
        for index, model in enumerate(shuffled)
    }


@given(dags())
def test_any_acyclic_graph_is_ordered(upstream: dict[str, list[str]]) -> None:
    order = topological_order(upstream)
    assert sorted(order) == sorted(upstream)
    assert_respects_edges(order, upstream)


@pytest.mark.parametrize(
    ("upstream", "cycle"),
    [
        ({"a": ["a"]}, ["a", "a"]),
        ({"a": ["b"], "b": ["a"]}, ["a", "b", "a"]),
        ({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}, ["a", "b", "c", "a"]),
        ({"root": [], "x": ["root", "z"], "y": ["x"], "z": ["y"]}, ["x", "z", "y", "x"]),
    ],
)
def test_a_cycle_is_named_in_full(upstream: dict[str, list[str]], cycle: list[str]) -> None:
    with pytest.raises(CycleError) as raised:
        topological_order(upstream)
    error = raised.value
    assert error.cycle == cycle
    assert str(error) == "models form a cycle: " + " -> ".join(cycle)
    assert isinstance(error, UsageError)
    assert error.exit_code == 2
    # every step of the named cycle is a real edge of the graph
    for child, parent in zip(error.cycle, error.cycle[1:], strict=False):
        assert parent in upstream[child]


def test_downstream_of_follows_every_path_in_execution_order() -> None:
    assert downstream_of(PIPELINE, "daily_revenue") == [
        m for m in topological_order(PIPELINE) if m not in ("daily_revenue", "unrelated")
    ]
    assert downstream_of(PIPELINE, "monthly_revenue") == ["revenue_report", "combined"]
    assert downstream_of(PIPELINE, "daily_audit") == ["combined"]
    assert downstream_of(PIPELINE, "combined") == []
    assert downstream_of(PIPELINE, "unrelated") == []


@given(dags(), st.data())
def test_downstream_is_the_transitive_closure(
    upstream: dict[str, list[str]], data: st.DataObject
) -> None:
    model = data.draw(st.sampled_from(sorted(upstream)))
    readers: dict[str, set[str]] = {name: set() for name in upstream}
    for child, parents in upstream.items():
        for parent in parents:
            readers[parent].add(child)
    reached: set[str] = set()
    frontier = [model]
    while frontier:
        for child in readers[frontier.pop()]:
            if child not in reached:
                reached.add(child)
                frontier.append(child)
    found = downstream_of(upstream, model)
    assert set(found) == reached
    order = topological_order(upstream)
    assert found == [m for m in order if m in reached]
