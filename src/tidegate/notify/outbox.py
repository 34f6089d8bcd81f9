"""The outbox: every event is written to the ledger first, then delivered, retried with backoff
until its target takes it. Nothing is lost while a target is down, and each target receives its
events in the order they were written.

Delivery is at least once: a process killed between a send and its record re-sends that event
after the claim expires. Within one ledger, rows are claimed before they are sent, so two
`deliver` calls (even concurrent ones) never send the same row twice otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from tidegate.domain.clock import Clock
from tidegate.notify.config import NotifyTarget
from tidegate.notify.row import ConsumerRead
from tidegate.state.base import StateStore

# How long a claimed row is held by the delivery that claimed it before another may try it: past
# any send's timeout (NotifyTarget.timeout_seconds is at most 300).
CLAIM = timedelta(minutes=10)
# 2 ** 40 seconds is far past any cap; the bound keeps the arithmetic finite.
MAX_EXPONENT = 40


class DeliveryFailed(Exception):
    """The target did not take the payload; the message is one line and holds no secret."""


Sender = Callable[[NotifyTarget, str], None]
"""Sends one payload to one target or raises DeliveryFailed (tidegate.notify.targets.Dispatcher)."""


@dataclass(frozen=True)
class Failure:
    target: str
    row_id: int
    attempts: int
    error: str
    next_attempt_at: str


@dataclass(frozen=True)
class DeliveryReport:
    delivered: tuple[int, ...]
    failures: tuple[Failure, ...]


def enqueue(
    state: StateStore,
    entries: Sequence[tuple[str, Mapping[str, Any]]],
    clock: Clock,
    reads: Mapping[int, Sequence[ConsumerRead]] | None = None,
) -> list[int]:
    """Write (target name, document) pairs to the outbox in one transaction, with the consumer
    reads each tells of (by entry index); their row ids."""
    at = _iso(clock.now())
    documents = payloads(entries)
    return state.add_outbox(documents, at, reads)


def deliver(
    state: StateStore, targets: Sequence[NotifyTarget], clock: Clock, sender: Sender
) -> DeliveryReport:
    """Send every due row of every target, oldest first. A target stops at its first failure
    (later rows wait behind it), which is recorded with the time of the next try; this never
    sleeps. Rows for targets not in `targets` stay queued."""
    delivered: list[int] = []
    failures: list[Failure] = []
    for target in targets:
        while True:
            now = clock.now()
            row = state.claim_outbox(target.name, _iso(now), _iso(now + CLAIM))
            if row is None:
                break
            try:
                sender(target, row.payload)
            except DeliveryFailed as error:
                retry_at = _iso(clock.now() + backoff(target, row.attempts))
                state.mark_outbox_failed(row.id, str(error), retry_at)
                failures.append(Failure(target.name, row.id, row.attempts, str(error), retry_at))
                break
            state.mark_outbox_delivered(row.id, _iso(clock.now()))
            delivered.append(row.id)
    return DeliveryReport(tuple(delivered), tuple(failures))


def backoff(target: NotifyTarget, attempts: int) -> timedelta:
    """The wait after the `attempts`-th failed try: base, doubling, capped."""
    exponent = min(max(attempts - 1, 0), MAX_EXPONENT)
    seconds = min(target.retry_max_seconds, target.retry_base_seconds * 2**exponent)
    return timedelta(seconds=seconds)


def payloads(entries: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, str]]:
    """(target, document) pairs as the outbox keeps them: (target, one line of JSON)."""
    return [(target, _dumps(document)) for target, document in entries]


def _dumps(document: Mapping[str, Any]) -> str:
    # one line, so a file target writes exactly one JSON document per line
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _iso(at: datetime) -> str:
    # the ledger's stamp format (tidegate.domain.clock.stamp), which compares correctly as text
    return at.astimezone(timezone.utc).isoformat(timespec="microseconds")
