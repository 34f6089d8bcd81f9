"""One outbox row, shared by the StateStore seam and the delivery loop (no I/O here)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OutboxRow:
    """An event waiting for (or done with) delivery to one target. Rows are kept after delivery
    and after every failure: the outbox is also the record of what was sent, when."""

    id: int
    target: str
    payload: str
    created_at: str
    attempts: int
    next_attempt_at: str
    delivered_at: str | None
    last_error: str | None


@dataclass(frozen=True)
class ConsumerRead:
    """A window of a model's partitions a registered consumer read (or is told of)."""

    consumer: str
    model: str
    start: int
    end: int
