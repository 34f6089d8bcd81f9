from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from tidegate.domain.gate import Gate, inputs_digest, is_flaky, sample


@given(
    st.lists(st.integers(0, 10_000), min_size=1, max_size=200), st.integers(1, 50), st.integers()
)
def test_a_sample_holds_the_oldest_and_newest_and_is_reproducible(
    candidates: list[int], size: int, seed: int
) -> None:
    chosen = sample(candidates, size, seed)
    distinct = sorted(set(candidates))
    assert chosen == sorted(set(chosen))
    assert set(chosen) <= set(distinct)
    assert len(chosen) == min(size, len(distinct))
    assert chosen[0] == distinct[0]
    if size >= 2:
        assert chosen[-1] == distinct[-1]
    assert sample(list(reversed(candidates)), size, seed) == chosen


def test_another_seed_samples_other_middle_partitions() -> None:
    days = list(range(365))
    draws = {tuple(sample(days, 5, seed)) for seed in range(10)}
    assert len(draws) > 1


def test_the_inputs_digest_ignores_order_but_not_content() -> None:
    triples = [("2025-01-01", "orders", "20:ab"), ("2025-01-02", "orders", "20:cd")]
    assert inputs_digest(triples) == inputs_digest(list(reversed(triples)))
    assert inputs_digest(triples) != inputs_digest(
        [*triples[:1], ("2025-01-02", "orders", "21:cd")]
    )


GATE = Gate("gate-1", "m", "v1", True, False, "x", ("2025-01-01",), {}, "alice", "t")


def test_a_gate_is_flaky_when_the_same_version_and_inputs_had_the_other_verdict() -> None:
    assert is_flaky([GATE], "v1", "x", passed=False)
    assert not is_flaky([GATE], "v1", "x", passed=True)
    assert not is_flaky([GATE], "v1", "other inputs", passed=False)
    assert not is_flaky([replace(GATE, version_id="v2")], "v1", "x", passed=False)
