"""When a partition is due: the model's cron schedule (UTC), fired after the partition's period.

A partition [start, end) is due at the first time the schedule fires at or after `end`; with no
schedule, at `end`. So at any instant the due partitions are those ending at or before the
schedule's latest fire time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from tidegate.domain.errors import UsageError
from tidegate.domain.partitions import TIME_SPAN_SHOWN, to_epoch

# croniter (and dateutil under it) is imported where a schedule is read: most commands of most
# projects never read one, and the import costs them 20 ms of start-up. Each schedule's latest
# known window of consecutive fires, [previous, next): within it the latest fire at or before
# an instant is its start, and the first fire after its start its end, with no cron arithmetic
# (nor croniter's import). A command starts with the windows an earlier one found (`learn`).
_windows: dict[str, tuple[int, int]] = {}


def is_valid(schedule: str) -> bool:
    from croniter import croniter

    return bool(croniter.is_valid(schedule))


def last_fire(schedule: str | None, now: int) -> int:
    """The latest time at or before `now` when the schedule fires (`now` without one)."""
    if schedule is None:
        return now
    window = _windows.get(schedule)
    if window is not None and window[0] <= now < window[1]:
        return window[0]
    fired = _fire(schedule, now, forward=False)
    _remember(schedule, fired, lambda: _fire(schedule, fired + 1, forward=True))
    return fired


def next_fire(schedule: str | None, at: int) -> int:
    """The first time at or after `at` when the schedule fires (`at` without one)."""
    if schedule is None:
        return at
    window = _windows.get(schedule)
    if window is not None and window[0] <= at <= window[1]:
        return window[0] if at == window[0] else window[1]
    fired = _fire(schedule, at, forward=True)
    _remember(schedule, None, lambda: fired)
    return fired


def windows() -> dict[str, tuple[int, int]]:
    """The windows of consecutive fires known so far, by schedule."""
    return dict(_windows)


def learn(known: Mapping[str, Any]) -> None:
    """Take windows an earlier command found (what is not a window of two increasing times is
    left out: the fires are computed again)."""
    for schedule, window in known.items():
        if (
            isinstance(schedule, str)
            and isinstance(window, (list, tuple))
            and len(window) == 2
            and all(type(t) is int for t in window)
            and window[0] < window[1]
        ):
            _windows.setdefault(schedule, (window[0], window[1]))


def _remember(schedule: str, start: int | None, end_of: Callable[[], int]) -> None:
    """Keep the window ending at `end_of()` (starting at `start`, or at the fire before its
    end); a window the calendar's ends cut short is not kept."""
    try:
        end = end_of()
        begin = start if start is not None else _fire(schedule, end - 1, forward=False)
    except UsageError:
        return
    if begin < end:
        _windows[schedule] = (begin, end)


def _fire(schedule: str, at: int, forward: bool) -> int:
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
