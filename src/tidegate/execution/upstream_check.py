"""Upstream partitions checked where they live: in the warehouse, not only in the ledger.

The ledger says which attempt published each upstream partition; the warehouse is the truth of
what was published (docs/design.md §9). A table dropped, or a warehouse restored from an older copy,
leaves the ledger saying "published" over rows that are gone or older. Before a batch reads an
upstream model, its table must exist and hold the commit markers of the attempts the ledger
names: one existence probe and one marker query per upstream model per batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tidegate.domain.model import ModelSpec
from tidegate.domain.partitions import PartitionKey, PartitionRange
from tidegate.domain.taint import MarkKind
from tidegate.engines.base import Engine

# A marker absent while the markers of other partitions of the same read are there: the
# warehouse is another state of the table than the one the ledger recorded.
RESTORED_HINT = " (restored from an older copy?)"


@dataclass(frozen=True)
class Divergence:
    """A published upstream partition (by the ledger) that the warehouse does not hold."""

    kind: MarkKind  # MISSING: the table or the marker is gone
    model: str
    grain: str
    start: int
    end: int
    attempt_id: str
    table_gone: bool
    # the markers of other partitions of the same read are there: another state of the table
    restored: bool = False

    @property
    def cause(self) -> str:
        """What differs, the same for every partition found in one read (a mark's reason)."""
        if self.table_gone:
            return f"the table {self.model} is not in the warehouse"
        hint = RESTORED_HINT if self.restored else ""
        return f"the warehouse holds no commit marker of the published attempt{hint}"

    @property
    def detail(self) -> str:
        """What differs for this partition."""
        if self.table_gone:
            return self.cause
        hint = RESTORED_HINT if self.restored else ""
        return (
            f"the warehouse holds no commit marker of its published attempt {self.attempt_id}{hint}"
        )


def diverged(
    engine: Engine, upstream: ModelSpec, published: Sequence[tuple[int, int, str]]
) -> dict[int, Divergence]:
    """Of the upstream partitions the ledger says are published ((start, end, attempt)), those
    the warehouse does not hold, by start. Read-only: one probe of the table and one marker
    query (none when nothing is published)."""
    if not published:
        return {}
    model, grain = upstream.name, upstream.grain.value
    if engine.table_columns(upstream.published_table) is None:
        return {
            s: Divergence(MarkKind.MISSING, model, grain, s, e, a, table_gone=True)
            for s, e, a in published
        }
    held = engine.markers([a for _, _, a in published])
    absent = [(s, e, a) for s, e, a in published if a not in held]
    # missing, as `verify` calls a partition without its marker; when the markers of others
    # read with it are there, the warehouse is likely an older copy of itself
    restored = bool(held)
    return {
        s: Divergence(MarkKind.MISSING, model, grain, s, e, a, False, restored)
        for s, e, a in absent
    }


def refusal(parent: ModelSpec, found: Sequence[Divergence]) -> str:
    """One line: the first upstream partition a partition may not read, what differs, and
    what to do."""
    first = min(found, key=_start)
    label = PartitionKey(parent.grain, first.start, first.end).label(parent.keys)
    more = f" (and {len(found) - 1} more of {parent.name})" if len(found) > 1 else ""
    span = PartitionRange(
        parent.grain, first.start, max(d.end for d in found), parent.chunk_size
    ).label(parent.keys)
    return (
        f"upstream {first.kind.value}: {parent.name} {label}: {first.detail}{more}; "
        f"`tidegate verify {parent.name}` compares the ledger with the warehouse, "
        f"`tidegate backfill {parent.name} --partitions {span}` republishes it"
    )


def _start(found: Divergence) -> int:
    return found.start
