"""Which partitions a replacement leaves stale: pure rules over a lineage given as data."""

from __future__ import annotations

from collections.abc import Sequence

from tidegate.domain.staleness import Reader, Replacement, stale_marks

DAY = 86_400


def replacement(old: str | None = "4:aaaa", new: str | None = "4:bbbb") -> Replacement:
    return Replacement("daily", "day", 10 * DAY, 11 * DAY, "att-old", "att-new", old, new, "run")


# who read what: (upstream, start, end) windows → readers, as the ledger's lineage would say
LINEAGE: dict[str, list[tuple[int, int, Reader]]] = {
    "daily": [
        (0, 30 * DAY, Reader("monthly", 0, 30 * DAY, "att-m", ("att-x", "att-old"))),
        (0, 30 * DAY, Reader("weekly", 7 * DAY, 14 * DAY, "att-w", ("att-new",))),
        (0, 30 * DAY, Reader("quarterly", 0, 90 * DAY, "att-q", ("att-old",))),
    ],
    "monthly": [(0, 30 * DAY, Reader("report", 0, 30 * DAY, "att-r", ("att-m",)))],
    "quarterly": [(0, 90 * DAY, Reader("report", 0, 30 * DAY, "att-r", ("att-q",)))],
}


def readers(model: str, start: int, end: int) -> Sequence[Reader]:
    return [r for s, e, r in LINEAGE.get(model, []) if s < end and e > start]


def test_a_replacement_with_the_same_content_marks_nothing() -> None:
    assert stale_marks(replacement("4:aaaa", "4:aaaa"), {"att-old"}, readers) == []


def test_readers_of_outdated_content_are_stale_and_those_of_the_new_content_are_not() -> None:
    marks = stale_marks(replacement(), {"att-old"}, readers)
    first = [(m.model, m.depth, m.via_model, m.via_start) for m in marks if m.depth == 1]
    assert first == [("monthly", 1, "daily", 10 * DAY), ("quarterly", 1, "daily", 10 * DAY)]
    assert "weekly" not in {m.model for m in marks}


def test_what_was_built_from_a_stale_partition_is_stale_once_at_its_shallowest_depth() -> None:
    marks = stale_marks(replacement(), {"att-old"}, readers)
    reports = [m for m in marks if m.model == "report"]
    assert [(m.depth, m.attempt_id) for m in reports] == [(2, "att-r")]


def test_a_reader_of_none_of_the_outdated_attempts_is_not_stale() -> None:
    assert stale_marks(replacement(), {"att-unrelated"}, readers) == []
