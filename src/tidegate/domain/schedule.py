"""When a partition is due: the model's cron schedule (UTC), fired after the partition's period.

A partition [start, end) is due at the first time the schedule fires at or after `end`; with no
schedule, at `end`. So at any instant the due partitions are those ending at or before the
schedule's latest fire time.
"""

from __future__ import annotations

from datetime import datetime, timezone

from tidegate.domain.errors import UsageError
from tidegate.domain.partitions import TIME_SPAN_SHOWN, to_epoch

# croniter (and dateutil under it) is imported where a schedule is read: most commands of most
# projects never read one, and the import costs them 25 ms of start-up


def is_valid(schedule: str) -> bool:
    from croniter import croniter

    return bool(croniter.is_valid(schedule))


def last_fire(schedule: str | None, now: int) -> int:
    """The latest time at or before `now` when the schedule fires (`now` without one)."""
    return _fire(schedule, now, forward=False)


def next_fire(schedule: str | None, at: int) -> int:
    """The first time at or after `at` when the schedule fires (`at` without one)."""
    return _fire(schedule, at, forward=True)


def _fire(schedule: str | None, at: int, forward: bool) -> int:
    if schedule is None:
        return at
    from croniter import CroniterError, croniter

    moment = datetime.fromtimestamp(at, tz=timezone.utc)
    try:
        if moment.second == 0 and croniter.match(schedule, moment):
            return at
        walk = croniter(schedule, moment)
        fired: datetime = walk.get_next(datetime) if forward else walk.get_prev(datetime)
    except (ValueError, OverflowError, CroniterError):
        # near the ends of the calendar a rare schedule's next fire (29 February, say) is past
        # year 9999 or before year 1
        raise UsageError(
            f"schedule {schedule!r} does not fire {'after' if forward else 'before'} "
            f"{moment.isoformat(timespec='minutes')[:16]} within the dates tidegate handles, "
            f"{TIME_SPAN_SHOWN}"
        ) from None
    return to_epoch(fired)
