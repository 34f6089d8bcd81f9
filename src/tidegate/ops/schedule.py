"""What the scheduler tick runs now, and what it runs next (read from the ledger only)."""

from __future__ import annotations

from dataclasses import dataclass

from tidegate.domain.model import Version
from tidegate.domain.partitions import (
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
    if not spec.grain.is_time:
        return spec.due(now, None, CATCH_UP)  # run on request only: nothing is due
    # only what was published among the partitions due by now: one written ahead of time (an
    # explicit run of a future day) must not hide the ones before it
    due_end = floor(spec.grain, last_fire(spec.schedule, now))
    newest = ctx.state.newest_published_end(version.model, due_end, version.version_id)
    return spec.due(now, newest, CATCH_UP)


@dataclass(frozen=True)
class NextDue:
    partition: str
    due_at: str  # when the schedule runs it (now or later), UTC


def next_due(ctx: Context, version: Version) -> NextDue | None:
    """The partition the next tick writes with `version`: the oldest one due now, or else the
    one that becomes due next."""
    spec = version.spec
    if not spec.grain.is_time:
        return None  # key lists and ranges run on request; a cursor model past its cursor
    due = due_partitions(ctx, version)
    # nothing due: the partition after the newest one that was
    start = due.start if len(due) else due.end
    key = PartitionKey(spec.grain, start, following(spec.grain, start))
    now = to_epoch(ctx.clock.now())
    at = now if len(due) else next_fire(spec.schedule, key.end)
    return NextDue(key.label(spec.keys), to_utc(at).isoformat())
