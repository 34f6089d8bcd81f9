"""Typed, ordered partition keys and ranges.

Every partition is (kind, start, end) with int64 bounds, end exclusive: epoch seconds (UTC) for
time grains, positions in the declared list for explicit keys. Ranges and plans are interval
arithmetic over these bounds, so a plan over a million partitions is a pair of integers, not a
million objects.
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

    @property
    def is_time(self) -> bool:
        return self is not Grain.KEY


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


def to_utc(ts: int) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def to_epoch(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp())


def _month_index(ts: int) -> int:
    moment = to_utc(ts)
    return moment.year * 12 + moment.month - 1


def _month_start(index: int) -> int:
    return to_epoch(datetime(index // 12, index % 12 + 1, 1, tzinfo=timezone.utc))


# Bounds that hold every partition key: "all of a model's history" in ledger range queries.
EVERYTHING = (-(2**63), 2**63 - 1)


def floor(grain: Grain, ts: int) -> int:
    """Start of the partition of `grain` that contains instant `ts` (or position `ts`)."""
    if grain is Grain.HOUR:
        return ts - ts % HOUR_SECONDS
    if grain is Grain.DAY:
        return ts - ts % DAY_SECONDS
    if grain is Grain.MONTH:
        return _month_start(_month_index(ts))
    return ts


def following(grain: Grain, start: int) -> int:
    """Start of the partition after the one starting at `start`."""
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
        return to_utc(self.start).strftime(_LABEL_FORMATS[self.grain][0])


@dataclass(frozen=True)
class PartitionRange:
    """Consecutive partitions of one grain, [start, end) in the grain's bounds."""

    grain: Grain
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError("a partition range cannot end before it starts")

    def __iter__(self) -> Iterator[PartitionKey]:
        cursor = self.start
        while cursor < self.end:
            nxt = following(self.grain, cursor)
            yield PartitionKey(self.grain, cursor, nxt)
            cursor = nxt

    def __len__(self) -> int:
        if self.grain is Grain.MONTH:
            return _month_index(self.end) - _month_index(self.start)
        size = {Grain.HOUR: HOUR_SECONDS, Grain.DAY: DAY_SECONDS}.get(self.grain, 1)
        return (self.end - self.start) // size

    def first(self) -> PartitionKey:
        return PartitionKey(self.grain, self.start, following(self.grain, self.start))

    def label(self, keys: Sequence[str] = ()) -> str:
        if self.start >= self.end:
            return "(empty)"
        first = self.first().label(keys)
        last_start = self.start
        if self.grain is Grain.MONTH:
            last_start = _month_start(_month_index(self.end) - 1)
        else:
            last_start = self.end - (following(self.grain, self.start) - self.start)
        last = PartitionKey(self.grain, last_start, self.end).label(keys)
        return first if first == last else f"{first}..{last}"


def parse_partition(text: str, grain: Grain, keys: Sequence[str] = ()) -> PartitionKey:
    """Parse one partition label in `grain`; raises UsageError with the expected form."""
    text = text.strip()
    if grain is Grain.KEY:
        if text not in keys:
            raise UsageError(f"unknown partition key {text!r}; declared keys: {', '.join(keys)}")
        index = list(keys).index(text)
        return PartitionKey(grain, index, index + 1)
    fmt, pattern, shown = _LABEL_FORMATS[grain]
    if not pattern.match(text):
        raise UsageError(f"partition {text!r} is not a {grain.value} partition (expected {shown})")
    try:
        moment = datetime.strptime(text, fmt).replace(tzinfo=timezone.utc)
    except ValueError:
        raise UsageError(f"partition {text!r} is not a valid date ({shown})") from None
    start = to_epoch(moment)
    return PartitionKey(grain, start, following(grain, start))


def parse_range(text: str, grain: Grain, keys: Sequence[str] = ()) -> PartitionRange:
    """Parse `START..END` (inclusive, in the grain), a single partition, or `all` for key lists."""
    text = text.strip()
    if not text.isprintable():  # the text is recorded and listed: no forged output lines
        raise UsageError(f"range {text!r} holds a line break or a control character")
    if text == "all":
        if grain is not Grain.KEY:
            raise UsageError("range 'all' is only for key-list models; give START..END")
        return PartitionRange(grain, 0, len(keys))
    if ".." in text:
        left, _, right = text.partition("..")
        first, last = parse_partition(left, grain, keys), parse_partition(right, grain, keys)
    else:
        first = last = parse_partition(text, grain, keys)
    if last.start < first.start:
        raise UsageError(f"range {text!r} ends before it starts")
    return PartitionRange(grain, first.start, last.end)


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

    def ranges(self, grain: Grain) -> list[PartitionRange]:
        return [PartitionRange(grain, start, end) for start, end in self.intervals]
