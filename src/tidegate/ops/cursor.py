"""Cursor models: where a version's cursor stands, how far a run may take it (the watermark),
and the batches of the interval in between.

The committed cursor is the end of the newest partition published by a version that measures
the same source column: the warehouse's commit markers, written in the publish's transaction,
settle the ledger after a crash (execution/reconcile.py), so it never runs ahead of the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidegate.domain.attempt import AttemptState
from tidegate.domain.clock import SystemTimer, Timer, stamp
from tidegate.domain.cursor import (
    CursorMark,
    CursorSpec,
    Observation,
    OpenTransactions,
    Watermark,
    WatermarkRule,
    below_newest,
    blocking,
    cursor_bounds,
    cursor_value,
    lag_watermark,
    max_watermark,
    snapshot_watermark,
    to_micros,
)
from tidegate.domain.errors import EngineError, RefusedError, UsageError
from tidegate.domain.model import Version
from tidegate.domain.partitions import Grain, PartitionRange

if TYPE_CHECKING:
    from tidegate.engines.base import Engine
    from tidegate.execution.executor import Outcome
    from tidegate.ops.context import Context
    from tidegate.state.base import StateStore

# how long a run waits for the transactions open at its own snapshot to end before it settles
# for an earlier run's candidate: the usual ones take milliseconds
SETTLE_SECONDS = 1.0
SETTLE_POLL_SECONDS = 0.02


@dataclass(frozen=True)
class Position:
    """Where a version's next interval starts (None: at the source's first row), and why
    (`after the committed cursor 150 (published by v1)`)."""

    value: int | None
    reason: str


def cursor_of(version: Version) -> CursorSpec:
    cursor = version.spec.cursor
    if cursor is None:
        raise UsageError(f"{version.model} is not a cursor model")
    return cursor


def position(state: StateStore, version: Version) -> Position:
    """The committed cursor `version` continues from: the cursor_start it declares until it
    has published, otherwise the furthest end published by the version measuring the same
    source column that published last (for an append without a unique key, the furthest end
    any such version published since another column last did). Raises RefusedError when that
    cursor is stale (a version measuring another column published after it) or was measured
    in another column, and the version declares no cursor_start it has not yet moved past, or
    when its cursor_start would append rows a second time.

    Which version published last is the ledger's order of attempts, never a timestamp (which
    follows --as-of and the clock)."""
    cursor = cursor_of(version)
    published = state.newest_published(version.model)  # last published first
    own = any(version_id == version.version_id for version_id, *_ in published)
    same: tuple[Version, int] | None = None
    newer: tuple[Version, CursorSpec] | None = None  # another column, published after `same`
    furthest: tuple[Version, int] | None = None  # same column, since another last published
    for version_id, end, _ in published:
        other = version if version_id == version.version_id else state.get_version(version_id)
        if other is None or other.spec.cursor is None:
            continue
        if other.spec.cursor.identity != cursor.identity:
            if same is not None:
                break
            if newer is None:
                newer = (other, other.spec.cursor)
            continue
        same = (other, end) if same is None else same
        furthest = (other, end) if furthest is None or end > furthest[1] else furthest
    if same is not None and furthest is not None and version.spec.duplicates_on_republish:
        # an append without a unique key never goes below what any version appended: a version
        # restarted lower (with a unique key) may have published less far than an earlier one
        same = furthest
    if cursor.start is not None and not own:
        if same is not None and cursor.start < same[1] and version.spec.duplicates_on_republish:
            raise RefusedError(
                f"{version.model} v{version.seq}: cursor_start {cursor.show(cursor.start)} is "
                f"below the committed cursor {cursor.show(same[1])}, and append without a "
                "unique key would add those rows again; declare a unique_key or a cursor_start "
                "at or above it"
            )
        declared = f"after cursor_start {cursor.show(cursor.start)} (declared by v{version.seq})"
        return Position(cursor.start, declared)
    if newer is not None:
        other, measured = newer
        if same is not None:
            raise RefusedError(
                f"{version.model} v{version.seq}: the committed cursor "
                f"{cursor.show(same[1])} of {cursor.table}.{cursor.column} is stale: v{other.seq} "
                f"published from {measured.table}.{measured.column} after it; deploy a new "
                "version declaring cursor_start"
            )
        raise RefusedError(
            f"{version.model} v{version.seq} reads its cursor from {cursor.table}.{cursor.column}"
            f", but the committed cursor was measured in {measured.table}.{measured.column} "
            f"(v{other.seq}); declare cursor_start in the new version"
        )
    if same is not None:
        other, end = same
        committed = f"after the committed cursor {cursor.show(end)} (published by v{other.seq})"
        return Position(end, committed)
    return Position(None, "from the source's first row (nothing committed yet)")


@dataclass(frozen=True)
class CursorPlan:
    """What a run of a cursor model processes: (start, watermark] in batches."""

    mark: CursorMark
    start: int | None

    @property
    def interval(self) -> tuple[int, int] | None:
        watermark = self.mark.watermark
        if self.start is None or watermark is None or watermark <= self.start:
            return None
        return self.start, watermark


def cursor_engine(engine: Engine) -> None:
    """Refuse a warehouse that cannot run cursor models (before anything is written)."""
    if not engine.capabilities.cursor_models:
        raise UsageError(
            f"cursor models run on a DuckDB or PostgreSQL warehouse, not yet on {engine.name}"
        )


def plan_run(
    ctx: Context, engine: Engine, run_id: str, version: Version, timer: Timer
) -> CursorPlan:
    """Read the cursor's extent and decide the watermark: the mark the run records (whether
    it moves the cursor or not) once its run is in the ledger."""
    cursor = cursor_of(version)
    cursor_engine(engine)
    where = position(ctx.state, version)
    _, high, seen = _extent(engine, cursor)
    rule, watermark = _watermark(
        ctx, engine, version.model, cursor, (where.value, high), seen, timer
    )
    unique = cursor.unique or engine.cursor_unique(cursor.table, cursor.column)
    if not unique and (rule is not WatermarkRule.LAG or cursor.lag == 0):
        # a lag of one unit or more already keeps below the newest value
        watermark = below_newest(watermark, cursor.show)
    start = where.value
    if start is None and watermark.value is not None:
        # nothing committed yet: the first interval starts below the lowest row there is once
        # the watermark settled (a row committed while the run waited may be the lowest)
        low, _, _ = _extent(engine, cursor)
        start = None if low is None else low - 1
    moved = watermark.value is not None and start is not None and watermark.value > start
    reason = watermark.reason
    if watermark.value is not None and not moved:
        reason += f"; nothing {where.reason}"
    mark = CursorMark(
        run_id=run_id,
        model=version.model,
        table=cursor.table,
        column=cursor.column,
        observed_at=stamp(ctx.clock),
        candidate=high,
        snapshot=None if seen is None else str(seen),
        committed=start,
        watermark=watermark.value if moved else None,
        rule=rule,
        reason=reason,
    )
    return CursorPlan(mark, start)


def _extent(
    engine: Engine, cursor: CursorSpec
) -> tuple[int | None, int | None, OpenTransactions | None]:
    low, high, transactions = engine.cursor_extent(cursor.table, cursor.column)
    try:
        return (
            None if low is None else cursor_value(cursor.kind, low),
            None if high is None else cursor_value(cursor.kind, high),
            None if transactions is None else OpenTransactions.parse(transactions),
        )
    except ValueError as error:
        raise EngineError(f"cursor {cursor.table}.{cursor.column}: {error}") from None


def _watermark(
    ctx: Context,
    engine: Engine,
    model: str,
    cursor: CursorSpec,
    extent: tuple[int | None, int | None],
    seen: OpenTransactions | None,
    timer: Timer,
) -> tuple[WatermarkRule, Watermark]:
    """The lag rule when declared; otherwise the newest settled candidate where transactions
    commit out of order (this run's, or an earlier run's still past the cursor), or max.
    `extent` is (the committed cursor, the newest value)."""
    start, high = extent
    if cursor.lag is not None:
        at = to_micros(ctx.clock.now())
        return WatermarkRule.LAG, lag_watermark(cursor.kind, high, cursor.lag, at, cursor.show)
    if seen is None:
        return WatermarkRule.MAX, max_watermark(high, cursor.show)
    now, waited = _settle(engine, seen, timer)
    earlier = [
        m.observation
        for m in ctx.state.cursor_marks(model, cursor.table, cursor.column)
        if m.snapshot is not None
        and m.candidate is not None
        and (start is None or m.candidate > start)
    ]
    found = snapshot_watermark([Observation(high, seen), *earlier], now, cursor.show)
    if waited:
        found = Watermark(found.value, f"{found.reason} (waited for transaction(s) {waited})")
    return WatermarkRule.SNAPSHOT, found


def _settle(engine: Engine, seen: OpenTransactions, timer: Timer) -> tuple[OpenTransactions, str]:
    """The transactions open now, once none of those open at `seen` is, or when
    SETTLE_SECONDS have passed; and those the run waited for and how long (`` if none)."""
    begun = timer.monotonic()
    deadline = begun + SETTLE_SECONDS
    first: tuple[str, ...] | None = None
    while True:
        now = OpenTransactions.parse(engine.open_transactions())
        open_now = blocking(seen, now)
        first = open_now if first is None else first
        if not open_now or timer.monotonic() >= deadline:
            waited = ""
            if first:
                shown = ", ".join(first[:5]) + (f" and {len(first) - 5} more" if first[5:] else "")
                waited = f"{shown}, {timer.monotonic() - begun:.2f}s"
            return now, waited
        timer.sleep(SETTLE_POLL_SECONDS)


def cursor_batches(
    ctx: Context, engine: Engine, run_id: str, version: Version, outcomes: Sequence[Outcome]
) -> tuple[Iterator[tuple[int, PartitionRange]], str]:
    """What a run of a cursor model executes, and a note saying how far and why."""
    cursor = cursor_of(version)
    plan = plan_run(ctx, engine, run_id, version, SystemTimer())
    ctx.state.record_cursor_mark(plan.mark)
    interval = plan.interval
    if interval is None:
        where = "nothing yet" if plan.start is None else f"cursor {cursor.show(plan.start)}"
        return iter(()), f"{version.model}: up to date at {where} ({plan.mark.reason})"

    halted = failed_of(version.model, outcomes)
    shown = f"({cursor.show(interval[0])}, {cursor.show(interval[1])}]"
    note = f"{version.model}: cursor {shown}, watermark {plan.mark.rule.value}: {plan.mark.reason}"
    return batches(engine, cursor, interval, cursor.batch_rows, halted), note


def failed_of(model: str, outcomes: Sequence[Outcome]) -> Callable[[], bool]:
    """Whether a partition of `model` among `outcomes` (so far) was not published."""

    def halted() -> bool:
        return any(o.model == model and o.state is not AttemptState.PUBLISHED for o in outcomes)

    return halted


def batches(
    engine: Engine,
    cursor: CursorSpec,
    interval: tuple[int, int],
    rows: int | None,
    halted: Callable[[], bool],
) -> Iterator[tuple[int, PartitionRange]]:
    """The interval in batches of at most `rows` source rows (rows sharing the last value
    stay in one batch; None: one batch), each one partition; none after a batch that was not
    published, so the cursor never passes an interval left behind."""
    start, watermark = interval
    index = 0
    while start < watermark:
        end = watermark
        if rows is not None:
            found = engine.cursor_batch_end(
                cursor.table,
                cursor.column,
                cursor_bounds(cursor.kind, start, watermark),
                rows,
            )
            if found is not None:
                end = cursor_value(cursor.kind, found)
        yield index, PartitionRange(Grain.CURSOR, start, end)
        if halted():
            return
        index, start = index + 1, end


def mark_doc(mark: CursorMark, cursor: CursorSpec | None) -> dict[str, object]:
    """A cursor mark as `show run` and `status` print it (values in the cursor's own form)."""

    def shown(value: int | None) -> str | None:
        if value is None:
            return None
        return str(value) if cursor is None else cursor.show(value)

    return {
        "model": mark.model,
        "run_id": mark.run_id,
        "cursor": f"{mark.table}.{mark.column}",
        "observed_at": mark.observed_at,
        "committed": shown(mark.committed),
        "candidate": shown(mark.candidate),
        # the transactions open when the max was read (PostgreSQL), that the run waited for
        "open_transactions": mark.snapshot,
        "watermark": shown(mark.watermark),
        "rule": mark.rule.value,
        "reason": mark.reason,
    }


def status_doc(state: StateStore, version: Version) -> dict[str, object] | None:
    """Where a cursor model's active version stands and what its newest run saw."""
    cursor = version.spec.cursor
    if cursor is None:
        return None
    try:
        where = position(state, version)
        committed = None if where.value is None else cursor.show(where.value)
        reason = where.reason
    except RefusedError as error:
        committed, reason = None, f"refused: {error}"
    marks = state.cursor_marks(version.model, cursor.table, cursor.column, limit=1)
    return {
        "cursor": f"{cursor.table}.{cursor.column}",
        "kind": cursor.kind.value,
        "committed": committed,
        "position": reason,
        "last_mark": mark_doc(marks[0], cursor) if marks else None,
    }
