"""Staleness: what replacing a published partition with other content leaves downstream.

A downstream partition whose attempt read an attempt of the replaced partition holding other
content than the new one was computed from data that no longer stands: it is marked stale
(depth 1), and so is every published partition built from it (depth 2 …), each once, at its
shallowest depth. A replacement with the same checksum changes nothing downstream, and a
reader that read an attempt with the new content is not stale.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from tidegate.domain.partitions import Grain, PartitionKey
from tidegate.domain.taint import Mark


@dataclass(frozen=True)
class Replacement:
    """A publish that replaced a published partition: the attempt it replaced and the new one."""

    model: str
    grain: str
    start: int
    end: int
    old_attempt: str
    new_attempt: str
    old_checksum: str | None
    new_checksum: str | None
    run_id: str

    @property
    def changed(self) -> bool:
        return self.old_checksum != self.new_checksum

    def reason(self) -> str:
        label = PartitionKey(Grain(self.grain), self.start, self.end).label()
        return (
            f"upstream changed: {self.model} {label} was republished with other content "
            f"({self.old_attempt} -> {self.new_attempt})"
        )


@dataclass(frozen=True)
class Reader:
    """A published partition whose attempt read a window of an upstream model, and the
    upstream attempts it read there."""

    model: str
    start: int
    end: int
    attempt_id: str
    read_attempts: tuple[str, ...]

    def marked(self, depth: int, via_model: str, via_start: int) -> Mark:
        """Its stale mark, reached at `depth` through that upstream partition."""
        return Mark(self.model, self.start, self.end, self.attempt_id, depth, via_model, via_start)


ReadersOf = Callable[[str, int, int], Sequence[Reader]]
"""(upstream model, start, end) → the published partitions of any model whose attempt read a
window of the upstream model overlapping [start, end)."""


def stale_marks(replaced: Replacement, outdated: Collection[str], readers: ReadersOf) -> list[Mark]:
    """The partitions `replaced` leaves stale: readers of the partition that read one of the
    `outdated` attempts (its attempts whose content differs from the new one), then, depth by
    depth, every reader of a stale partition."""
    if not replaced.changed:
        return []
    found: dict[tuple[str, int], Mark] = {}
    frontier: list[Mark] = []
    for reader in readers(replaced.model, replaced.start, replaced.end):
        if (reader.model, reader.start) in found or not set(reader.read_attempts) & set(outdated):
            continue
        mark = reader.marked(1, replaced.model, replaced.start)
        found[(reader.model, reader.start)] = mark
        frontier.append(mark)
    while frontier:
        below: list[Mark] = []
        for upstream in frontier:
            for reader in readers(upstream.model, upstream.start, upstream.end):
                if (reader.model, reader.start) in found:
                    continue
                mark = reader.marked(upstream.depth + 1, upstream.model, upstream.start)
                found[(reader.model, reader.start)] = mark
                below.append(mark)
        frontier = below
    return sorted(found.values(), key=lambda m: (m.depth, m.model, m.start))
