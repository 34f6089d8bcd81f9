"""Verification: the ledger's published partitions against the warehouse's commit markers and
rows (docs/design.md §9: the warehouse holds the truth of what was published; never trust the ledger
alone). Pure: the caller reads both sides."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from tidegate.domain.taint import MarkKind

# Below this many published partitions a model's checksums are all compared; above, a sample
# of this many (one pass over the table either way: the sample bounds the comparison, and
# keeps the report of a huge model readable).
DEFAULT_SAMPLE = 1000


class Divergence(str, Enum):
    """How the warehouse differs from what the ledger records of a partition."""

    MISSING_TABLE = "missing table"
    MISSING_MARKER = "missing marker"
    OTHER_MARKER = "other marker"  # the partition's newest marker names another attempt
    CHECKSUM_DIFFERS = "checksum differs"
    UNRECORDED_MARKER = "marker with no ledger record"

    @property
    def mark_kind(self) -> MarkKind | None:
        """The mark `verify --repair` records; None for a marker the ledger never heard of
        (there is no recorded partition to mark: the ledger itself is behind)."""
        return _MARKS.get(self)


_MARKS = {
    Divergence.MISSING_TABLE: MarkKind.MISSING,
    Divergence.MISSING_MARKER: MarkKind.MISSING,
    Divergence.OTHER_MARKER: MarkKind.DIVERGED,
    Divergence.CHECKSUM_DIFFERS: MarkKind.DIVERGED,
}


@dataclass(frozen=True)
class Recorded:
    """A partition the ledger records as published, and by which attempt."""

    start: int
    end: int
    attempt_id: str
    checksum: str | None


@dataclass(frozen=True)
class Finding:
    """One partition where the warehouse and the ledger disagree."""

    kind: Divergence
    model: str
    start: int
    end: int
    # the ledger's published attempt (None: a marker of an attempt the ledger does not record)
    attempt_id: str | None
    # what the ledger expects there (its checksum), and what the warehouse holds: the other
    # marker's attempt, the checksum measured, or the unrecorded marker's attempt
    expected: str | None = None
    found: str | None = None


def compare(
    model: str,
    recorded: Sequence[Recorded],
    table_exists: bool,
    marked: Mapping[int, Sequence[str]],
    measured: Mapping[int, str] | None = None,
) -> list[Finding]:
    """One finding at most per recorded partition: its table is missing, its partition has no
    marker, its newest marker (`marked`: attempt ids by partition start, oldest first) names
    another attempt, or — for the partitions in `measured` (start → checksum of its rows now) —
    its rows are not what was published."""
    found: list[Finding] = []
    for part in recorded:
        attempts = marked.get(part.start, ())
        kind, seen = None, None
        if not table_exists:
            kind = Divergence.MISSING_TABLE
        elif not attempts:
            kind = Divergence.MISSING_MARKER
        elif attempts[-1] != part.attempt_id:
            kind, seen = Divergence.OTHER_MARKER, attempts[-1]
        elif (measured or {}).get(part.start, part.checksum) != part.checksum:
            kind, seen = Divergence.CHECKSUM_DIFFERS, (measured or {})[part.start]
        if kind is not None:
            found.append(
                Finding(kind, model, part.start, part.end, part.attempt_id, part.checksum, seen)
            )
    return found


def sample(recorded: Sequence[Recorded], size: int | None, seed: str) -> list[Recorded]:
    """The partitions whose checksums are compared: `size` of them chosen at random (seeded by
    `seed`, so a second look compares the same ones), or with `size` None every one when
    fewer than DEFAULT_SAMPLE, else DEFAULT_SAMPLE of them."""
    wanted = size if size is not None else DEFAULT_SAMPLE
    if len(recorded) <= wanted:
        return list(recorded)
    chosen = random.Random(seed).sample(range(len(recorded)), wanted)
    return [recorded[i] for i in sorted(chosen)]
