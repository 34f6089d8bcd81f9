"""Source passes read ahead: one pass over the source windows of several upcoming batches.

A batch's pass over a source (its input fingerprints, the reconciliations' source side, the rows
the upstream guard counts) costs the warehouse a fixed few milliseconds whatever the window
holds: for a batch of one day, that fixed cost is most of it. Where no other process can change
a source while tidegate holds the warehouse (`Engine.frozen_while_open`: a table of DuckDB's
file, which tidegate keeps locked), the first batch of a stretch of contiguous upcoming batches
reads the source over the whole stretch (at most READ_AHEAD_PARTITIONS partitions) and the
later batches take their partitions from that pass. Every value of the pass is grouped by
partition, so a partition gets what a pass over its own window would have given. Memory: one
stretch's profiles per batch in flight.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from tidegate.domain.errors import EngineError
from tidegate.domain.model import Source
from tidegate.domain.partitions import PartitionRange
from tidegate.engines.base import Engine, PartitionProfile, window_bounds

READ_AHEAD_PARTITIONS = 32

Batches = Iterator[tuple[int, PartitionRange]]


def source_pass(
    engine: Engine, source: Source, grain: str, aggregates: Sequence[str], start: int, end: int
) -> dict[int | None, PartitionProfile]:
    """One pass over a source's rows in the window [start, end), grouped by partition."""
    return engine.profile(
        source.table,
        False,
        source.time_column,
        grain,
        window_bounds(start, end),
        aggregates=aggregates,
    )


@dataclass
class _Pass:
    done: threading.Event = field(default_factory=threading.Event)
    profiles: dict[int | None, PartitionProfile] | None = None
    # what cut the pass short other than the warehouse's error (a second Ctrl-C): the batches
    # waiting for it stop with it, without reading
    aborted: BaseException | None = None


class Stretch:
    """Contiguous upcoming batches' window [start, end): each frozen source is read over it
    once, by the first batch that asks, while the others wait for that pass."""

    def __init__(self, start: int, end: int, frozen: frozenset[str]) -> None:
        self.start = start
        self.end = end
        self.frozen = frozen
        self._lock = threading.Lock()
        self._passes: dict[tuple[str, tuple[str, ...]], _Pass] = {}

    def covers(self, window: PartitionRange) -> bool:
        return self.start <= window.start and window.end <= self.end

    def profiles(
        self,
        engine: Engine,
        source: Source,
        grain: str,
        aggregates: Sequence[str],
        window: PartitionRange,
    ) -> dict[int | None, PartitionProfile]:
        """The profiles of the source's partitions in `window` (which the stretch covers)."""
        if source.name not in self.frozen:
            return source_pass(engine, source, grain, aggregates, window.start, window.end)
        key = (source.name, tuple(aggregates))
        with self._lock:
            found = self._passes.get(key)
            reads = found is None
            if found is None:
                found = self._passes[key] = _Pass()
        if reads:
            # whoever creates the pass reads it at once and always sets `done`: no waiter waits
            # on a pass nobody reads
            try:
                found.profiles = source_pass(
                    engine, source, grain, aggregates, self.start, self.end
                )
            except EngineError:
                pass  # another partition's rows may be at fault: each batch reads its own window
            except BaseException as error:
                found.aborted = error
                raise
            finally:
                found.done.set()
        else:
            found.done.wait()
            if found.aborted is not None:
                raise found.aborted
        if found.profiles is None:
            return source_pass(engine, source, grain, aggregates, window.start, window.end)
        return {
            start: profile
            for start, profile in found.profiles.items()
            if start is not None and window.start <= start < window.end
        }


class Upcoming:
    """The batches still to start, a few of them buffered: a starting batch's stretch reaches
    over the buffered batches that follow it without a gap."""

    def __init__(self, batches: Batches, frozen: frozenset[str]) -> None:
        self._batches = batches
        self._frozen = frozen
        self._buffered: deque[tuple[int, PartitionRange]] = deque()
        self._stretch: Stretch | None = None

    def __iter__(self) -> Upcoming:
        return self

    def __next__(self) -> tuple[int, PartitionRange]:
        return self._buffered.popleft() if self._buffered else next(self._batches)

    def stretch(self, window: PartitionRange) -> Stretch:
        """The stretch the batch of `window` reads its sources in: the current one if it covers
        the window, else a new one from the window over the batches after it."""
        if self._stretch is not None and self._stretch.covers(window):
            return self._stretch
        end, count = window.end, len(window)
        for following in self._following():
            if following.start != end or count + len(following) > READ_AHEAD_PARTITIONS:
                break
            end, count = following.end, count + len(following)
        self._stretch = Stretch(window.start, end, self._frozen)
        return self._stretch

    def _following(self) -> Iterator[PartitionRange]:
        """The batches after the current one, pulled into the buffer as they are looked at
        (at most READ_AHEAD_PARTITIONS of them: each holds a partition at least)."""
        for position in range(READ_AHEAD_PARTITIONS):
            if position == len(self._buffered):
                pulled = next(self._batches, None)
                if pulled is None:
                    return
                self._buffered.append(pulled)
            yield self._buffered[position][1]
