"""Run ids have one recognizable, sortable form; checksums print and parse back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidegate.domain.checksum import MODULUS, Checksum
from tidegate.domain.ids import RUN_ID, looks_like_run_id, new_attempt_id, new_run_id


def test_run_ids_are_recognizable_and_sortable() -> None:
    ids = [new_run_id() for _ in range(50)]
    assert all(RUN_ID.match(i) for i in ids)
    assert all(looks_like_run_id(i) for i in ids)
    assert len(set(ids)) == len(ids)
    stamps = [i.split("-")[1] for i in ids]
    assert stamps == sorted(stamps)
    attempt = new_attempt_id()
    assert attempt.startswith("att-")
    assert not looks_like_run_id(attempt)
    assert not looks_like_run_id("daily_revenue")
    assert looks_like_run_id("run-anything")


@given(rows=st.integers(min_value=0, max_value=2**40), digest=st.integers(0, MODULUS - 1))
def test_checksum_text_round_trip(rows: int, digest: int) -> None:
    text = str(Checksum(rows, digest))
    assert Checksum.parse(text) == Checksum(rows, digest)
    count, _, hex_digest = text.partition(":")
    assert int(count) == rows
    assert len(hex_digest) == 16
