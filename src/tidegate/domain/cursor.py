"""Cursor models: a monotonic cursor (an integer id, or a timestamp) over an append-only source,
and the watermark rule that says how far a run may advance it.

Cursor values are int64: integers as they are, timestamps as epoch microseconds (UTC). A run
processes (committed, watermark]; the watermark is the highest value no transaction still open
can fall below.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any

MICROS = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class CursorKind(str, Enum):
    INTEGER = "integer"
    TIMESTAMP = "timestamp"


class WatermarkRule(str, Enum):
    """How far a run may advance the cursor."""

    # the newest max(cursor) whose snapshot has settled: every transaction open when it was read
    # has ended (PostgreSQL, where ids and timestamps commit out of order)
    SNAPSHOT = "snapshot"
    # max(cursor) - lag, or for timestamps also at most now - lag (a declared `cursor_lag`)
    LAG = "lag"
    # max(cursor): a warehouse that one process writes (DuckDB) has no transaction in flight
    MAX = "max"


@dataclass(frozen=True)
class CursorSpec:
    """A cursor model's declaration: which source and column the cursor measures, its kind,
    where a version starts when it declares so, the lag rule and the batch size."""

    source: str  # the source's name in tidegate.toml
    table: str  # its physical table, as the version was built
    column: str
    kind: CursorKind
    start: int | None = None
    lag: int | None = None
    batch_rows: int | None = None

    @property
    def identity(self) -> tuple[str, str]:
        """What a committed cursor was measured in: values of another source or column are not
        comparable with it."""
        return (self.table, self.column)

    def config(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "table": self.table,
            "column": self.column,
            "kind": self.kind.value,
            "start": self.start,
            "lag": self.lag,
            "batch_rows": self.batch_rows,
        }

    def show(self, value: int) -> str:
        return show_value(self.kind, value)


def to_micros(moment: datetime) -> int:
    """Epoch microseconds of a timestamp (naive ones are UTC), exact."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * MICROS + delta.microseconds


def from_micros(value: int) -> datetime:
    """The naive UTC timestamp of epoch microseconds (what a TIMESTAMP column holds)."""
    return (_EPOCH + timedelta(microseconds=value)).replace(tzinfo=None)


def cursor_value(kind: CursorKind, raw: object) -> int:
    """A value read from the warehouse as a cursor value; raises ValueError for another kind."""
    if kind is CursorKind.TIMESTAMP:
        if not isinstance(raw, datetime):
            raise ValueError(f"expected a timestamp, the warehouse returned {type(raw).__name__}")
        return to_micros(raw)
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"expected an integer, the warehouse returned {type(raw).__name__}")
    return raw


def bound(kind: CursorKind, value: int) -> object:
    """A cursor value as the driver binds it: an int, or a naive UTC datetime."""
    return from_micros(value) if kind is CursorKind.TIMESTAMP else value


def cursor_bounds(kind: CursorKind, start: int, end: int) -> dict[str, object]:
    """$start/$end of the cursor interval (start, end], as the driver binds them."""
    return {"start": bound(kind, start), "end": bound(kind, end)}


def show_value(kind: CursorKind, value: int) -> str:
    if kind is CursorKind.TIMESTAMP:
        return from_micros(value).isoformat(sep=" ")
    return str(value)


def parse_start(kind: CursorKind, text: str | int) -> int:
    """A declared `cursor_start`: an integer, or an ISO 8601 timestamp (UTC when naive)."""
    if kind is CursorKind.INTEGER:
        if isinstance(text, bool) or not isinstance(text, int):
            raise ValueError(f"{text!r} is not an integer")
        return text
    if not isinstance(text, str):
        raise ValueError(f'{text!r} is not a timestamp (e.g. "2026-01-01 00:00:00")')
    try:
        return to_micros(datetime.fromisoformat(text))
    except ValueError:
        raise ValueError(f'{text!r} is not a timestamp (e.g. "2026-01-01 00:00:00")') from None


_DURATION = re.compile(r"^(\d+)(us|ms|s|m|h|d)$")
_UNIT_MICROS = {"us": 1, "ms": 1_000, "s": MICROS, "m": 60 * MICROS, "h": 3600 * MICROS}


def parse_lag(kind: CursorKind, text: str | int) -> int:
    """A declared `cursor_lag` in cursor units: a count of ids, or a duration for timestamps
    (`30s`, `5m`, `1h`, `1d`)."""
    if kind is CursorKind.INTEGER:
        if isinstance(text, bool) or not isinstance(text, int) or text < 0:
            raise ValueError(f"{text!r} is not a count of ids (an integer, 0 or more)")
        return text
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f'{text!r} is not a duration (e.g. "30s", "5m", "1h")')
    amount, unit = int(match.group(1)), match.group(2)
    return amount * _UNIT_MICROS.get(unit, 86_400 * MICROS)


# watermark rules ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """A PostgreSQL snapshot (`pg_current_snapshot()`): transactions below xmin have ended,
    those at or above xmax had not started, and those in xip were in progress."""

    xmin: int
    xmax: int
    xip: tuple[int, ...] = ()

    @staticmethod
    def parse(text: str) -> Snapshot:
        """From `xmin:xmax:xip,...`; raises ValueError otherwise."""
        parts = text.strip().split(":")
        listed = parts[2].split(",") if len(parts) == 3 and parts[2] else []
        if len(parts) != 3 or not all(p.isdigit() for p in (parts[0], parts[1], *listed)):
            raise ValueError(f"not a snapshot: {text!r}")
        xip = tuple(int(x) for x in listed)
        snapshot = Snapshot(int(parts[0]), int(parts[1]), xip)
        if snapshot.xmax < snapshot.xmin or any(
            not snapshot.xmin <= x < snapshot.xmax for x in xip
        ):
            raise ValueError(f"not a snapshot: {text!r}")
        return snapshot

    def __str__(self) -> str:
        return f"{self.xmin}:{self.xmax}:{','.join(str(x) for x in self.xip)}"

    def ended(self, xid: int) -> bool:
        """Whether transaction `xid` had ended (committed or aborted) at this snapshot."""
        return xid < self.xmin or (xid < self.xmax and xid not in self.xip)

    def open_of(self, earlier: Snapshot) -> tuple[int, ...]:
        """The transactions in progress at `earlier` that are still in progress now."""
        return tuple(x for x in earlier.xip if not self.ended(x))


@dataclass(frozen=True)
class Observation:
    """One read of max(cursor) and, where transactions commit out of order, the snapshot it was
    read in (both in one statement)."""

    candidate: int | None  # None: the source had no rows
    snapshot: Snapshot | None = None


@dataclass(frozen=True)
class Watermark:
    """How far a run may process, and why."""

    value: int | None  # None: not past the committed cursor
    reason: str


XID_MODULUS = 2**32


def blocking(seen: Snapshot, now: Snapshot, writers: frozenset[int] | None) -> tuple[int, ...]:
    """The transactions in progress at `seen` that still are at `now` and, when `writers` is
    known (the 32-bit ids of the transactions now holding a lock on the source table), that
    write the source: only those can still commit a value at or below what `seen` saw. A
    transaction that wrote a value below the candidate took the table's lock before `seen`
    was read, and holds it until it ends."""
    still_open = now.open_of(seen)
    if writers is None:
        return still_open
    return tuple(x for x in still_open if x % XID_MODULUS in writers)


def snapshot_watermark(
    observations: Sequence[Observation],
    now: Snapshot,
    writers: frozenset[int] | None = None,
    show: Callable[[int], str] = str,
) -> Watermark:
    """The newest observed candidate that is safe: every transaction in progress at its
    snapshot that writes the source (see `blocking`) has ended by `now`, so any row at or
    below it (ids and clock timestamps are assigned in time order) is visible from now on.
    `observations` newest first."""
    waiting: tuple[int, ...] = ()
    for index, seen in enumerate(observations):
        if seen.candidate is None or seen.snapshot is None:
            continue
        still_open = blocking(seen.snapshot, now, writers)
        if not still_open:
            which = "this run's" if index == 0 else "an earlier run's"
            shown = show(seen.candidate)
            if not waiting:
                return Watermark(seen.candidate, f"max {shown} settled ({which} snapshot)")
            return Watermark(
                seen.candidate,
                f"max {shown} ({which} snapshot); newer rows wait for transaction(s) "
                f"{_xids(waiting)} still open",
            )
        if not waiting:
            waiting = still_open
    if waiting:
        return Watermark(None, f"waiting for transaction(s) {_xids(waiting)} still open")
    return Watermark(None, "the source has no rows")


def lag_watermark(
    kind: CursorKind,
    candidate: int | None,
    lag: int,
    now_micros: int,
    show: Callable[[int], str] = str,
) -> Watermark:
    """max - lag; for timestamps also at most now - lag (rows may still arrive that late)."""
    if candidate is None:
        return Watermark(None, "the source has no rows")
    value = candidate - lag
    reason = f"max {show(candidate)} minus lag {lag}"
    if kind is CursorKind.TIMESTAMP:
        reason = f"max {show(candidate)} minus lag {lag // MICROS}s"
        if now_micros - lag < value:
            value = now_micros - lag
            reason = f"now minus lag {lag // MICROS}s"
    return Watermark(value, reason)


def max_watermark(candidate: int | None, show: Callable[[int], str] = str) -> Watermark:
    if candidate is None:
        return Watermark(None, "the source has no rows")
    return Watermark(candidate, f"max {show(candidate)} (one writer, no transaction in flight)")


def _xids(xids: Sequence[int]) -> str:
    shown = ", ".join(str(x) for x in xids[:5])
    return shown + (f" and {len(xids) - 5} more" if len(xids) > 5 else "")


@dataclass(frozen=True)
class CursorMark:
    """What one run of a cursor model saw and how far it went (the ledger's `cursor_marks`)."""

    run_id: str
    model: str
    table: str
    column: str
    observed_at: str
    candidate: int | None
    snapshot: str | None
    committed: int | None
    watermark: int | None
    rule: WatermarkRule
    reason: str

    @property
    def observation(self) -> Observation:
        return Observation(
            self.candidate, None if self.snapshot is None else Snapshot.parse(self.snapshot)
        )
