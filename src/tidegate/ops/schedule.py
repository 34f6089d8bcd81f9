"""What the scheduler tick runs now, and what it runs next (read from the ledger only)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from tidegate.domain.model import Version
from tidegate.domain.partitions import (
    WHOLE_LABEL,
    WHOLE_TABLE,
    Grain,
    IntervalSet,
    PartitionKey,
    PartitionRange,
    floor,
    following,
    to_epoch,
    to_utc,
)
from tidegate.domain.schedule import last_fire, next_fire
from tidegate.ops.context import Context

# At most this many due partitions per model and tick: a longer gap is a backfill's job.
CATCH_UP = 30


def due_partitions(ctx: Context, version: Version) -> PartitionRange:
    """What a scheduler tick runs for `version` now: the partitions due since the newest one it
    published (idempotent: nothing when it is up to date)."""
    spec = version.spec
    now = to_epoch(ctx.clock.now())
    if spec.grain is Grain.TABLE:
        whole = spec.span(WHOLE_TABLE.start, WHOLE_TABLE.end)
        if spec.whole_table_due(now, _published_at(ctx, version)):
            return whole
        return spec.span(whole.end, whole.end)
    if not spec.grain.is_time:
        return spec.due(now, None, CATCH_UP)  # run on request only: nothing is due
    # only what was published among the partitions due by now: one written ahead of time (an
    # explicit run of a future day) must not hide the ones before it
    due_end = floor(spec.grain, last_fire(spec.schedule, now))
    newest = ctx.state.newest_published_end(version.model, due_end, version.version_id)
    return spec.due(now, newest, CATCH_UP)


def _published_at(ctx: Context, version: Version) -> int | None:
    """When `version` last published its whole table (None: it has not)."""
    row = ctx.state.partition(version.model, WHOLE_TABLE.start)
    if row is None or row.version_id != version.version_id or row.published_at is None:
        return None
    return to_epoch(datetime.fromisoformat(row.published_at))


@dataclass(frozen=True)
class NextDue:
    partition: str  # the first partition the next tick writes
    through: str  # its last (the same partition when it writes one)
    due_at: str  # when the schedule runs it (now or later), UTC
    # the model's partitions before the tick that no version published, oldest first: the
    # tick only looks back CATCH_UP partitions (one for a first version), so these stay
    # missing until a backfill writes them
    unpublished: tuple[str, ...]


def next_due(ctx: Context, version: Version) -> NextDue | None:
    """The partitions the next tick writes with `version`: those due now, or else the one that
    becomes due next; and the unpublished history before them."""
    spec = version.spec
    if spec.grain is Grain.TABLE:
        return _next_whole_table(ctx, version)
    if not spec.grain.is_time:
        return None  # key lists and ranges run on request; a cursor model past its cursor
    due = due_partitions(ctx, version)
    # nothing due: the partition after the newest one that was
    start = due.start if len(due) else due.end
    key = PartitionKey(spec.grain, start, following(spec.grain, start))
    last = spec.span(due.start, due.end).label(spec.keys) if len(due) else key.label(spec.keys)
    now = to_epoch(ctx.clock.now())
    at = now if len(due) else next_fire(spec.schedule, key.end)
    before = spec.all_partitions_until(start)
    published = IntervalSet.of(ctx.state.published_intervals(version.model, before.start, start))
    missing = IntervalSet.of([(before.start, before.end)]).minus(published)
    return NextDue(
        key.label(spec.keys),
        last.rsplit("..", 1)[-1],
        to_utc(at).isoformat(),
        tuple(r.label(spec.keys) for r in missing.ranges(spec.grain)),
    )


def _next_whole_table(ctx: Context, version: Version) -> NextDue | None:
    """A whole table is due now, or at the schedule's first fire after its last publish; it
    has no history to leave unpublished."""
    spec = version.spec
    now = to_epoch(ctx.clock.now())
    published_at = _published_at(ctx, version)
    if spec.whole_table_due(now, published_at):
        at = now
    elif published_at is None or spec.schedule is None:
        return None
    else:
        at = next_fire(spec.schedule, published_at + 1)
    return NextDue(WHOLE_LABEL, WHOLE_LABEL, to_utc(at).isoformat(), ())


def tick_text(model: str, upcoming: NextDue | dict[str, Any]) -> tuple[str, str | None]:
    """The partitions of the next tick (`A` or `A..B`), and a sentence naming the history
    before them that it will not write, with the backfill that does (None: there is none).
    Shared by deploy and status, so that both say the same."""
    doc = upcoming if isinstance(upcoming, dict) else asdict(upcoming)
    first, through = doc["partition"], doc["through"]
    window = first if first == through else f"{first}..{through}"
    gaps: list[str] = list(doc["unpublished"])
    if not gaps:
        return window, None
    # each gap is its own backfill: one over the whole span would rewrite what lies between
    oldest = gaps[0]
    named = oldest if len(gaps) == 1 else f"{len(gaps)} ranges, the oldest {oldest},"
    return window, f"{named} never published: tidegate backfill {model} --partitions {oldest}"
