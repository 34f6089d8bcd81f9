"""Named crash points along the partition protocol, armed by an environment variable.

`TIDEGATE_CRASH_AT=after_stage` kills the process with SIGKILL the first time that point is
reached; `after_stage:3` on the third time. `TIDEGATE_CRASH_SIGNAL=SIGSTOP` stops it there
instead (a process paused past its lease, to be continued later). A no-op unless armed.
"""

from __future__ import annotations

import os
import signal
import threading

ENVIRONMENT_VARIABLE = "TIDEGATE_CRASH_AT"
SIGNAL_VARIABLE = "TIDEGATE_CRASH_SIGNAL"

CRASH_POINTS = (
    "after_intent",
    "after_stage",
    "after_audit",
    "before_publish",
    "after_publish",
    "after_ledger",
)

# points of one kind of warehouse only: a publish into Iceberg tables with its branch written
# and audited, main not moved yet
ICEBERG_POINTS = ("iceberg_branch_written",)
EVERY_POINT = CRASH_POINTS + ICEBERG_POINTS

_hits: dict[str, int] = {}
_lock = threading.Lock()  # worker threads reach the same point concurrently


def crash_point(name: str) -> None:
    if name not in EVERY_POINT:
        raise ValueError(f"unregistered crash point {name!r}")
    armed = os.environ.get(ENVIRONMENT_VARIABLE)
    if not armed:
        return
    target, _, nth = armed.partition(":")
    if target != name:
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        reached = _hits[name] >= int(nth or 1)
    if reached:
        os.kill(os.getpid(), signal.Signals[os.environ.get(SIGNAL_VARIABLE, "SIGKILL")])
