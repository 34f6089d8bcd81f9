"""`tidegate worker`: claim and run batches of distributed backfills (docs/design.md §7)."""

from __future__ import annotations

import dataclasses
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import click

from tidegate.cli import common, emit, streams_events
from tidegate.event_stream import EventStream
from tidegate.terminal import echo


@contextmanager
def stops_after_batch(stop_flag: threading.Event, quiet: bool) -> Iterator[None]:
    """SIGTERM or a first Ctrl-C: finish the batch in hand, then exit; a second Ctrl-C aborts
    it (nothing of it is published; its lease expires and another worker takes it)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop_flag.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop_flag.set()
        if not quiet:
            echo("stopping after the batch in hand (Ctrl-C again aborts it)", err=True)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, action in previous.items():
            signal.signal(number, action)


@click.command()
@click.option("--name", default=None, help="This worker's name in leases (default host:pid).")
@click.option(
    "--lease-seconds",
    type=click.FloatRange(min=1.0),
    default=None,
    help="How long a claim lives without a heartbeat (default 30).",
)
@click.option(
    "--poll-seconds",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="How often an idle worker looks for a batch.",
)
@click.option("--exit-when-idle", is_flag=True, help="Exit once no distributed run is live.")
@click.option("--max-batches", type=click.IntRange(min=1), default=None, help="Exit after N.")
@click.option("--wait", is_flag=True, help="Wait while a single writer holds the warehouse.")
@common
@streams_events
def worker(
    ctx: Any,
    as_json: bool,
    events: EventStream | None,
    name: str | None,
    lease_seconds: float | None,
    poll_seconds: float,
    exit_when_idle: bool,
    max_batches: int | None,
    wait: bool,
) -> None:
    """Claim batches of distributed backfills through leases and run them."""
    from tidegate.domain.clock import SystemTimer
    from tidegate.domain.queue import DEFAULT_LEASE_SECONDS
    from tidegate.ops import distributed

    options = distributed.WorkerOptions(
        name=name or distributed.default_worker_name(),
        lease_seconds=lease_seconds or DEFAULT_LEASE_SECONDS,
        poll_seconds=poll_seconds,
        exit_when_idle=exit_when_idle,
        max_batches=max_batches,
    )

    def tell(event: distributed.WorkerEvent) -> None:
        if events is not None:
            document = {"schema": "tidegate.worker-event/v1", "worker": options.name}
            events.write(document | dataclasses.asdict(event))
        if as_json:
            return
        where = f"{event.run_id}" + (f" batch {event.batch}" if event.batch is not None else "")
        line = f"{options.name}: {event.event} {where}"
        if event.token is not None:
            line += f" (token {event.token})"
        if event.tally is not None:
            t = event.tally
            line += f": {t.published} published, {t.failed} failed, {t.skipped} skipped"
        if event.detail:
            line += f": {event.detail}"
        echo(line)

    stop_flag = threading.Event()
    with stops_after_batch(stop_flag, as_json):
        settled = distributed.work(ctx, options, stop_flag, tell, SystemTimer())
    document = {"schema": "tidegate.worker-result/v1", "worker": options.name, "settled": settled}
    emit(as_json, document, lambda: echo(f"{options.name}: {settled} batch(es) settled"))
