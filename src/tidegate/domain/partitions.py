"""Typed, ordered partition keys and ranges.

Every partition is (kind, start, end) with int64 bounds, end exclusive: epoch seconds (UTC) for
time grains, positions in the declared list for explicit keys, the key values themselves for key
ranges (chunks of `chunk_size` keys aligned to its multiples, labelled by their first key).
Ranges and plans are interval arithmetic over these bounds, so a plan over a million partitions
is a pair of integers, not a million objects. A key range's chunk size is the one thing a bound
cannot tell, so a range of chunks carries it (`PartitionRange.step`).

A cursor partition is the interval of cursor values one batch of a cursor model processed,
(start, end] in the cursor's own units (an id, or epoch microseconds): consecutive batches
share a bound, so as [start, end) intervals they abut and merge like any other partitions.

A whole-table model (grain "table") has one partition, `all`: the bounds [0, 1), as if it were
the one key of a key list, so that ranges, the ledger and lineage need nothing of their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum

from tidegate.domain.errors import UsageError

HOUR_SECONDS = 3600
DAY_SECONDS = 86400


class Grain(str, Enum):
    HOUR = "hour"
    DAY = "day"
    MONTH = "month"
    KEY = "key"
    RANGE = "range"
    CURSOR = "cursor"
    TABLE = "table"

    @property
    def is_time(self) -> bool:
        return self in (Grain.HOUR, Grain.DAY, Grain.MONTH)


# the label of a whole-table model's one partition, and the range of every key of a key list
WHOLE_LABEL = "all"


# ASCII digits only: `\d` alone takes any script's digits (２０２５), which strptime reads too
_LABEL_FORMATS = {
    Grain.HOUR: (
        "%Y-%m-%dT%H",
        re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}$", re.ASCII),
        "YYYY-MM-DDTHH",
    ),
    Grain.DAY: ("%Y-%m-%d", re.compile(r"^\d{4}-\d{2}-\d{2}$", re.ASCII), "YYYY-MM-DD"),
    Grain.MONTH: ("%Y-%m", re.compile(r"^\d{4}-\d{2}$", re.ASCII), "YYYY-MM"),
}
_LABEL_LENGTHS = {Grain.HOUR: 13, Grain.DAY: 10, Grain.MONTH: 7}


def label_format(grain: Grain) -> str:
    """The strftime format of a time grain's partition labels (what an orchestrator's time
    partitions are keyed by, so that its keys are tidegate's labels)."""
    return _LABEL_FORMATS[grain][0]


def to_utc(ts: int) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def to_epoch(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp())


# The instants time partitions lie between: 0002-01-01 up to 9999-01-01 (exclusive). Python's
# dates (and Spark's) run from year 1 to 9999; a year kept free at either end leaves the
# partitions next to any partition, and the month holding it, dates too, so that nothing
# computed from a partition that was accepted can fall off the calendar.
TIME_SPAN = (
    to_epoch(datetime(2, 1, 1, tzinfo=timezone.utc)),
    to_epoch(datetime(9999, 1, 1, tzinfo=timezone.utc)),
)
TIME_SPAN_SHOWN = "0002-01-01 to 9998-12-31"


def _month_index(ts: int) -> int:
    moment = to_utc(ts)
    return moment.year * 12 + moment.month - 1


def _month_start(index: int) -> int:
    return to_epoch(datetime(index // 12, index % 12 + 1, 1, tzinfo=timezone.utc))


def _chunk(step: int) -> int:
    if step < 1:
        raise ValueError("a key range needs its chunk size")
    return step


# Bounds that hold every partition key: "all of a model's history" in ledger range queries.
EVERYTHING = (-(2**63), 2**63 - 1)


def floor(grain: Grain, ts: int, step: int = 0) -> int:
    """Start of the partition of `grain` that contains instant `ts` (or position `ts`, or key
    `ts` in chunks of `step` keys)."""
    if grain is Grain.RANGE:
        return ts - ts % _chunk(step)
    if grain is Grain.HOUR:
        return ts - ts % HOUR_SECONDS
    if grain is Grain.DAY:
        return ts - ts % DAY_SECONDS
    if grain is Grain.MONTH:
        return _month_start(_month_index(ts))
    return ts


def following(grain: Grain, start: int, step: int = 0) -> int:
    """Start of the partition after the one starting at `start` (chunks of `step` keys for a
    key range)."""
    if grain is Grain.RANGE:
        return start + _chunk(step)
    if grain is Grain.HOUR:
        return start + HOUR_SECONDS
    if grain is Grain.DAY:
        return start + DAY_SECONDS
    if grain is Grain.MONTH:
        return _month_start(_month_index(start) + 1)
    return start + 1


@dataclass(frozen=True, order=True)
class PartitionKey:
    """One partition: the unit of checkpoint, rerun and taint."""

    grain: Grain
    start: int
    end: int

    def label(self, keys: Sequence[str] = ()) -> str:
        if self.grain is Grain.KEY:
            return keys[self.start] if self.start < len(keys) else f"#{self.start}"
        if self.grain is Grain.RANGE:
            return str(self.start)
        if self.grain is Grain.CURSOR:
            return f"({self.start},{self.end}]"
        if self.grain is Grain.TABLE:
            return WHOLE_LABEL
        # isoformat, not strftime: %Y drops the leading zeros of years before 1000
        return to_utc(self.start).isoformat()[: _LABEL_LENGTHS[self.grain]]


WHOLE_TABLE = PartitionKey(Grain.TABLE, 0, 1)


@dataclass(frozen=True)
class PartitionRange:
    """Consecutive partitions of one grain, [start, end) in the grain's bounds; `step` is a key
    range's chunk size (0 for the other grains, whose bounds tell their partitions)."""

    grain: Grain
    start: int
    end: int
    step: int = 0

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError("a partition range cannot end before it starts")

    def __iter__(self) -> Iterator[PartitionKey]:
        if self.grain is Grain.CURSOR:
            # a cursor range is the one interval a batch processes, not one partition per value
            if self.start < self.end:
                yield PartitionKey(self.grain, self.start, self.end)
            return
        cursor = self.start
        while cursor < self.end:
            nxt = following(self.grain, cursor, self.step)
            yield PartitionKey(self.grain, cursor, nxt)
            cursor = nxt

    def __len__(self) -> int:
        if self.grain is Grain.CURSOR:
            return int(self.start < self.end)
        if self.grain is Grain.MONTH:
            return _month_index(self.end) - _month_index(self.start)
        if self.grain is Grain.RANGE:
            return (self.end - self.start) // _chunk(self.step)
        size = {Grain.HOUR: HOUR_SECONDS, Grain.DAY: DAY_SECONDS}.get(self.grain, 1)
        return (self.end - self.start) // size

    def first(self) -> PartitionKey:
        if self.grain is Grain.CURSOR:
            return PartitionKey(self.grain, self.start, self.end)
        return PartitionKey(self.grain, self.start, following(self.grain, self.start, self.step))

    def label(self, keys: Sequence[str] = ()) -> str:
        if self.start >= self.end:
            return "(empty)"
        if self.grain is Grain.CURSOR:
            return self.first().label()
        first = self.first().label(keys)
        last_start = self.start
        if self.grain is Grain.MONTH:
            last_start = _month_start(_month_index(self.end) - 1)
        else:
            last_start = self.end - (following(self.grain, self.start, self.step) - self.start)
        last = PartitionKey(self.grain, last_start, self.end).label(keys)
        return first if first == last else f"{first}..{last}"


def parse_partition(
    text: str, grain: Grain, keys: Sequence[str] = (), step: int = 0
) -> PartitionKey:
    """Parse one partition label in `grain` (`step`: a key range's chunk size); raises
    UsageError with the expected form."""
    text = text.strip()
    if grain is Grain.RANGE:
        return _parse_chunk(text, _chunk(step))
    if grain is Grain.KEY:
        if text not in keys:
            raise UsageError(f"unknown partition key {text!r}; declared keys: {', '.join(keys)}")
        index = list(keys).index(text)
        return PartitionKey(grain, index, index + 1)
    if grain is Grain.CURSOR:
        return _parse_cursor(text)
    if grain is Grain.TABLE:
        if text != WHOLE_LABEL:
            raise UsageError(
                f"partition {text!r} is not a partition of a whole-table model: its one "
                f"partition is {WHOLE_LABEL!r}"
            )
        return WHOLE_TABLE
    fmt, pattern, shown = _LABEL_FORMATS[grain]
    if not pattern.match(text):
        raise UsageError(f"partition {text!r} is not a {grain.value} partition (expected {shown})")
    try:
        moment = datetime.strptime(text, fmt).replace(tzinfo=timezone.utc)
    except ValueError:
        raise UsageError(f"partition {text!r} is not a valid date ({shown})") from None
    start = to_epoch(moment)
    # the span's bounds start partitions of every grain: a partition starting inside ends inside
    if not TIME_SPAN[0] <= start < TIME_SPAN[1]:
        raise UsageError(
            f"partition {text!r} is outside the dates tidegate handles, {TIME_SPAN_SHOWN}"
        )
    return PartitionKey(grain, start, following(grain, start))


def _parse_chunk(text: str, step: int) -> PartitionKey:
    """A key range's chunk from its label, its first key: a multiple of the chunk size."""
    if not re.fullmatch(r"-?\d{1,19}", text, re.ASCII):
        raise UsageError(
            f"partition {text!r} is not a key (expected an integer such as {step * 2})"
        )
    start = int(text)
    if start % step:
        below = start - start % step
        raise UsageError(
            f"partition {text!r} is not the first key of a chunk of {step:,}: chunks start at "
            f"multiples of {step} ({below}, {below + step})"
        )
    if not EVERYTHING[0] <= start <= EVERYTHING[1] - step:
        raise UsageError(f"partition {text!r} is beyond the 64-bit keys")
    return PartitionKey(Grain.RANGE, start, start + step)


_CURSOR_LABEL = re.compile(r"^\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\]$", re.ASCII)


def _parse_cursor(text: str) -> PartitionKey:
    match = _CURSOR_LABEL.match(text)
    if match is None:
        raise UsageError(
            f"partition {text!r} is not a cursor partition (expected (START,END], e.g. (100,250])"
        )
    start, end = int(match.group(1)), int(match.group(2))
    if end <= start:
        raise UsageError(f"cursor partition {text!r} ends before it starts")
    return PartitionKey(Grain.CURSOR, start, end)


_EXAMPLES = {
    Grain.HOUR: "2025-01-01T00..2025-01-01T23",
    Grain.DAY: "2025-01-01..2025-12-31",
    Grain.MONTH: "2025-01..2025-12",
}


def example_range(grain: Grain) -> str:
    """A range to show in an error that asks for one, in the grain's own labels (`all` for
    the partitionings whose labels come from the data)."""
    return _EXAMPLES.get(grain, "all")


def parse_range(text: str, grain: Grain, keys: Sequence[str] = (), step: int = 0) -> PartitionRange:
    """Parse `START..END` (inclusive, in the grain), a single partition, or `all` for key lists
    and whole tables (a key range's `all` depends on its table's keys: ops resolve it before
    calling this)."""
    text = text.strip()
    if not text.isprintable():  # the text is recorded and listed: no forged output lines
        raise UsageError(f"range {text!r} holds a line break or a control character")
    if grain is Grain.CURSOR:
        raise UsageError(
            "a cursor model's partitions are the intervals its runs processed: `tidegate run "
            "MODEL` (or `backfill MODEL --partitions all`) continues past its committed cursor; "
            "ranges of a cursor model cannot be rerun, tainted or compared yet"
        )
    if text == WHOLE_LABEL:
        if grain is Grain.TABLE:
            return PartitionRange(grain, WHOLE_TABLE.start, WHOLE_TABLE.end)
        if grain is Grain.RANGE:
            raise UsageError("range 'all' of a key-range model is for backfill; give START..END")
        if grain is not Grain.KEY:
            raise UsageError(
                "range 'all' is only for key-list models, whole-table models and key-range "
                "backfills; give START..END"
            )
        return PartitionRange(grain, 0, len(keys))
    if ".." in text:
        left, _, right = text.partition("..")
        first = parse_partition(left, grain, keys, step)
        last = parse_partition(right, grain, keys, step)
    else:
        first = last = parse_partition(text, grain, keys, step)
    if last.start < first.start:
        raise UsageError(f"range {text!r} ends before it starts")
    return PartitionRange(grain, first.start, last.end, step)


@dataclass(frozen=True)
class IntervalSet:
    """A sorted set of disjoint [start, end) intervals over int64 bounds."""

    intervals: tuple[tuple[int, int], ...] = ()

    @staticmethod
    def of(pairs: Sequence[tuple[int, int]]) -> IntervalSet:
        merged: list[tuple[int, int]] = []
        for start, end in sorted(p for p in pairs if p[0] < p[1]):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return IntervalSet(tuple(merged))

    def minus(self, other: IntervalSet) -> IntervalSet:
        result: list[tuple[int, int]] = []
        for start, end in self.intervals:
            cursor = start
            for o_start, o_end in other.intervals:
                if o_end <= cursor or o_start >= end:
                    continue
                if o_start > cursor:
                    result.append((cursor, o_start))
                cursor = max(cursor, o_end)
            if cursor < end:
                result.append((cursor, end))
        return IntervalSet(tuple(result))

    def __bool__(self) -> bool:
        return bool(self.intervals)

    def ranges(self, grain: Grain, step: int = 0) -> list[PartitionRange]:
        return [PartitionRange(grain, start, end, step) for start, end in self.intervals]
