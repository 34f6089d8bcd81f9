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

    # the newest max(cursor) that has settled: every transaction open when it was read has
    # ended (PostgreSQL, where ids and timestamps commit out of order)
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
    # no two source rows share a cursor value (`cursor_unique`, or the model's unique key)
    unique: bool = False

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
            "unique": self.unique,
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


# PostgreSQL's virtual transaction ids as pg_locks shows them (`backend/local`; `-1/xid` for a
# prepared transaction): every transaction has one from its first statement, before it writes
_TRANSACTION = re.compile(r"^-?\d+/\d+$")


@dataclass(frozen=True)
class OpenTransactions:
    """The transactions open at one moment on a PostgreSQL server (other than tidegate's own
    sessions and sessions of other databases), whether or not they have written anything yet:
    a transaction that started before a read may still commit a row whose cursor value it took
    (its now(), the id it drew) before that read."""

    ids: frozenset[str] = frozenset()

    @staticmethod
    def parse(text: str | None) -> OpenTransactions:
        """From `3/45,7/12` (empty or None: none); raises ValueError otherwise."""
        listed = [t for t in (text or "").strip().split(",") if t]
        if not all(_TRANSACTION.match(t) for t in listed):
            raise ValueError(f"not a list of open transactions: {text!r}")
        return OpenTransactions(frozenset(listed))

    def __str__(self) -> str:
        return ",".join(sorted(self.ids, key=_transaction_order))

    def still_open(self, now: OpenTransactions) -> tuple[str, ...]:
        """The transactions open here that are still open at `now`."""
        return tuple(sorted(self.ids & now.ids, key=_transaction_order))


def _transaction_order(text: str) -> tuple[int, int]:
    backend, local = text.split("/")
    return int(backend), int(local)


@dataclass(frozen=True)
class Observation:
    """One read of max(cursor) and, where transactions commit out of order, the transactions
    open just after that read's snapshot was taken (read in the same statement)."""

    candidate: int | None  # None: the source had no rows
    open: OpenTransactions | None = None


@dataclass(frozen=True)
class Watermark:
    """How far a run may process, and why."""

    value: int | None  # None: not past the committed cursor
    reason: str


def blocking(seen: OpenTransactions, now: OpenTransactions) -> tuple[str, ...]:
    """The transactions open at `seen` that still are at `now`: any of them may still commit a
    value at or below what `seen` read (it took the value inside the transaction, possibly
    before the read). A transaction that started after the read takes values above it."""
    return seen.still_open(now)


def snapshot_watermark(
    observations: Sequence[Observation],
    now: OpenTransactions,
    show: Callable[[int], str] = str,
) -> Watermark:
    """The newest observed candidate that is safe: every transaction open when it was read
    has ended by `now`, so any row at or below it (values taken inside their transactions, in
    time order) is visible from now on. `observations` newest first."""
    waiting: tuple[str, ...] = ()
    for index, seen in enumerate(observations):
        if seen.candidate is None or seen.open is None:
            continue
        still_open = blocking(seen.open, now)
        if not still_open:
            which = "this run's" if index == 0 else "an earlier run's"
            shown = show(seen.candidate)
            if not waiting:
                return Watermark(seen.candidate, f"max {shown} settled ({which} read)")
            return Watermark(
                seen.candidate,
                f"max {shown} ({which} read); newer rows wait for transaction(s) "
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


def below_newest(watermark: Watermark, show: Callable[[int], str] = str) -> Watermark:
    """A cursor column that is not unique: rows sharing the newest value may still arrive (a
    timestamp taken in the same microsecond, an id repeated), so the run stops one unit below
    the value its rule reached and leaves that value to the next run."""
    if watermark.value is None:
        return watermark
    return Watermark(
        watermark.value - 1,
        f"{watermark.reason}; rows at {show(watermark.value)} wait for the next run "
        "(the cursor column is not unique)",
    )


def _xids(xids: Sequence[object]) -> str:
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
    snapshot: str | None  # the transactions open at the read (OpenTransactions)
    committed: int | None
    watermark: int | None
    rule: WatermarkRule
    reason: str

    @property
    def observation(self) -> Observation:
        """What the run read; without the transactions open at the read (DuckDB, or a record
        in another form) it never settles a candidate."""
        if self.snapshot is None:
            return Observation(self.candidate)
        try:
            return Observation(self.candidate, OpenTransactions.parse(self.snapshot))
        except ValueError:
            return Observation(self.candidate)
