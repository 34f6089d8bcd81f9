"""G5 bounded blast radius, measured: the executor never exceeds its rate or its concurrency.

The rate limiter is driven by a fake timer (the Timer seam), so the test asserts on recorded
start times instead of sleeping; concurrency is observed by counting stagings in flight on the
engine handles the worker threads use, with a barrier that makes the first two really overlap.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.kit import warehouse_rows
from tidegate.domain.attempt import AttemptState, RunStatus
from tidegate.domain.backfill import RATE_WINDOW_SECONDS, BackfillPlan
from tidegate.domain.clock import stamp
from tidegate.domain.ids import new_run_id
from tidegate.domain.model import Version
from tidegate.domain.partitions import IntervalSet, PartitionRange, parse_range
from tidegate.domain.run import Run
from tidegate.execution.executor import Options, Outcome, Report
from tidegate.execution.session import WriterSession, writer_session
from tidegate.ops.context import Context


class FakeTimer:
    """Monotonic time that only moves when the code under test sleeps."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0, seconds
        self.slept.append(seconds)
        self.now += seconds


@contextmanager
def session_for(project: Path) -> Iterator[tuple[Context, WriterSession, Version]]:
    """A writer session on `project`, as `ops.backfill` builds it, and daily_revenue's version."""
    ctx = Context(project)
    try:
        state = ctx.state.model_state("daily_revenue")
        assert state is not None and state.active_version
        version = ctx.state.get_version(state.active_version)
        assert version is not None
        with writer_session(ctx.project, ctx.state, ctx.clock, False) as session:
            yield ctx, session, version
    finally:
        ctx.close()


def batches(version: Version, partitions: str, batch_size: int) -> list[PartitionRange]:
    spec = version.spec
    chosen = parse_range(partitions, spec.grain, spec.keys)
    plan = BackfillPlan(
        model=spec.name,
        version_id=version.version_id,
        grain=spec.grain,
        selection=IntervalSet.of([(chosen.start, chosen.end)]).intervals,
        batch_size=batch_size,
    )
    return list(plan.batches())


def new_run(ctx: Context, partitions: str) -> str:
    run_id = new_run_id()
    ctx.state.create_run(
        Run(
            run_id=run_id,
            kind="backfill",
            models=("daily_revenue",),
            partitions=partitions,
            requester="test",
            status=RunStatus.RUNNING,
            started_at=stamp(ctx.clock),
        )
    )
    return run_id


def execute_all(
    ctx: Context,
    session: WriterSession,
    version: Version,
    partitions: str,
    batch_size: int,
    concurrency: int,
) -> Report:
    """A new run over `partitions` in batches, at most `concurrency` in flight."""
    return session.executor(FakeTimer()).execute(
        new_run(ctx, partitions),
        version,
        enumerate(batches(version, partitions, batch_size)),
        Options(max_concurrency=concurrency),
    )


def most_in_any_window(starts: list[float], window: float) -> int:
    """The most starts inside any half-open window [t, t + window)."""
    return max(sum(1 for s in starts if t <= s < t + window) for t in starts)


def test_most_in_any_window_counts_a_sliding_window() -> None:
    assert most_in_any_window([0.0, 0.0, 60.0, 60.0], 60) == 2
    assert most_in_any_window([0.0, 30.0, 59.0, 61.0], 60) == 3
    assert most_in_any_window([0.0, 60.0, 120.0], 60) == 1


def test_rate_limit_never_exceeds_n_starts_in_any_sliding_minute(project: Path) -> None:
    rate = 2
    timer = FakeTimer()
    starts: list[float] = []
    outcomes: list[Outcome] = []
    partitions = "2025-01-01..2025-01-07"
    with session_for(project) as (ctx, session, version):
        run_id = new_run(ctx, partitions)
        planned = batches(version, partitions, batch_size=1)
        report = session.executor(timer).execute(
            run_id,
            version,
            enumerate(planned),
            Options(
                max_concurrency=2,
                rate_per_minute=rate,
                on_batch=lambda _index, _batch, at: starts.append(at),
                on_outcome=outcomes.append,
            ),
        )
    assert isinstance(report, Report)
    assert report.published == 7 and report.failed == 0 and report.skipped == 0
    assert {o.state for o in outcomes} == {AttemptState.PUBLISHED}
    assert len(starts) == 7 == len(planned)
    assert starts == sorted(starts)
    assert most_in_any_window(starts, RATE_WINDOW_SECONDS) <= rate, starts
    # 7 starts at 2 a minute need at least 3 more minutes after the first: the limiter waited
    assert starts[-1] - starts[0] >= 3 * RATE_WINDOW_SECONDS, starts
    assert timer.now - 1000.0 >= 3 * RATE_WINDOW_SECONDS and timer.slept
    # …and no longer than it had to: each pair starts as soon as the window allows (a margin
    # of microseconds against float rounding is fine)
    assert starts[-1] - starts[0] <= 3 * RATE_WINDOW_SECONDS + 1e-3, (starts, timer.slept)
    days = warehouse_rows(project, "SELECT count(DISTINCT order_date) FROM daily_revenue")
    assert days == [(7,)]


def test_without_a_rate_the_fake_clock_never_sleeps(project: Path) -> None:
    """The control for the test above: the waits come from the rate, not from the executor."""
    timer = FakeTimer()
    starts: list[float] = []
    partitions = "2025-01-01..2025-01-04"
    with session_for(project) as (ctx, session, version):
        report = session.executor(timer).execute(
            new_run(ctx, partitions),
            version,
            enumerate(batches(version, partitions, batch_size=1)),
            Options(max_concurrency=2, on_batch=lambda _i, _b, at: starts.append(at)),
        )
    assert report.published == 4
    assert starts == [1000.0] * 4 and timer.slept == []


class Gauge:
    """Counts stagings in flight; the first `meet` of them wait for each other."""

    def __init__(self, meet: int) -> None:
        self.lock = threading.Lock()
        self.current = self.highest = self.entered = 0
        self.barrier = threading.Barrier(meet, timeout=30)
        self.meet = meet

    def enter(self) -> bool:
        with self.lock:
            self.current += 1
            self.entered += 1
            self.highest = max(self.highest, self.current)
            return self.entered <= self.meet

    def leave(self) -> None:
        with self.lock:
            self.current -= 1


class CountingHandle:
    """An engine handle whose stage() is counted; everything else goes to the real handle."""

    def __init__(self, inner: Any, gauge: Gauge) -> None:
        self._inner = inner
        self._gauge = gauge

    def stage(self, staging: str, sql_text: str, bounds: Any) -> None:
        first = self._gauge.enter()
        try:
            if first:
                self._gauge.barrier.wait()  # raises BrokenBarrierError if nothing overlaps
            self._inner.stage(staging, sql_text, bounds)
        finally:
            self._gauge.leave()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_concurrency_never_exceeds_max_concurrency_and_reaches_it(project: Path) -> None:
    gauge = Gauge(meet=2)
    handles: list[CountingHandle] = []
    partitions = "2025-01-01..2025-01-12"
    with session_for(project) as (ctx, session, version):
        original = session.engine.handle

        def counted() -> Any:
            handles.append(CountingHandle(original(), gauge))
            return handles[-1]

        session.engine.handle = counted  # type: ignore[method-assign]
        report = execute_all(ctx, session, version, partitions, batch_size=2, concurrency=2)
    assert report.published == 12 and report.failed == 0
    assert len(handles) == 2, "one handle per batch in flight"
    assert gauge.entered == 6  # six batches of two, each staged once
    assert gauge.highest == 2, gauge.highest
    assert gauge.current == 0


def test_batches_publish_one_at_a_time_while_others_compute(project: Path) -> None:
    """Three batches are staged together (a barrier), so their workers reach the publish at
    about the same moment; the first publish waits a while for a second to start beside it,
    and none may."""
    staged = Gauge(meet=3)
    publishing = Gauge(meet=1)
    beside = threading.Event()
    partitions = "2025-01-01..2025-01-09"
    with session_for(project) as (ctx, session, version):
        original_handle, original_publish = session.engine.handle, session.engine.publish

        def counted() -> Any:
            return CountingHandle(original_handle(), staged)

        def publish(*args: Any, **kwargs: Any) -> Any:
            first = publishing.enter()
            try:
                if publishing.current > 1:
                    beside.set()
                if first:
                    beside.wait(timeout=0.5)  # another publish would start now, were it allowed
                return original_publish(*args, **kwargs)
            finally:
                publishing.leave()

        session.engine.handle = counted  # type: ignore[method-assign]
        session.engine.publish = publish  # type: ignore[method-assign]
        report = execute_all(ctx, session, version, partitions, batch_size=1, concurrency=3)
    assert report.published == 9 and report.failed == 0
    assert staged.highest == 3, "the batches did not compute together"
    assert publishing.entered == 9
    assert publishing.highest == 1 and not beside.is_set(), "two publishes overlapped"


def test_a_throttled_run_ends_once_its_last_batch_is_done(project: Path) -> None:
    """No rate slot is waited for when no batch is left to start: 10 batches at 5/min start at
    0s and 60s, and the run ends as the last one is done, not a window later (the fake clock
    moves only when the executor waits, so a batch takes no time on it)."""
    timer = FakeTimer()
    starts: list[float] = []
    partitions = "2025-07-01..2025-07-10"
    with session_for(project) as (ctx, session, version):
        report = session.executor(timer).execute(
            new_run(ctx, partitions),
            version,
            enumerate(batches(version, partitions, batch_size=1)),
            Options(rate_per_minute=5, on_batch=lambda _i, _b, at: starts.append(at)),
        )
    assert report.published == 10
    assert starts[-1] - starts[0] <= RATE_WINDOW_SECONDS + 1e-3, starts
    assert timer.now - starts[-1] < 1e-3, (timer.now, starts[-1], timer.slept)


def test_the_eta_counts_the_throttle_and_rate_waits_are_shown(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """10 partitions at 5/min, each taking 2s on the fake clock: five are done at 10s, and the
    rest wait for the window until 60s. The ETA at 5/10 says so (the measured pace alone said
    10s), and without a terminal a line is printed during the wait."""
    from tidegate.ops import backfill as op
    from tidegate.progress import BackfillProgress

    timer = FakeTimer(0.0)
    progress = BackfillProgress(quiet=False, timer=timer)
    halfway: list[tuple[float, float]] = []

    def outcome(done: Outcome) -> None:
        timer.now += 2.0
        progress.outcome(done)
        if progress.done == 5:
            halfway.append((timer.now, progress.eta()))

    ctx = Context(project)
    try:
        request = op.Request("daily_revenue", "2025-07-01..2025-07-10", rate="5/min")
        result = op.start(
            ctx, request, threading.Event(), outcome, progress.start, timer, watch=progress
        )
    finally:
        ctx.close()
    assert result.report.published == 10
    [(at, eta)] = halfway
    truth = timer.now - at
    assert truth >= 50.0, truth
    assert abs(eta - truth) <= 0.2 * truth, (eta, truth)
    lines = capsys.readouterr().out.splitlines()
    waits = [line for line in lines if "5/10 partitions, waiting for a rate slot, next in" in line]
    assert len(waits) >= 10, lines  # one every two seconds of a 50s wait
    assert "ETA 5" in waits[0] or "ETA 6" in waits[0], waits[0]


def stopped_after(project: Path, partitions: str, published: int, rate: str | None = None) -> str:
    """A backfill over `partitions` stopped once `published` of them are published (as
    `backfill stop` would); its run id."""
    from tidegate.ops import backfill as op

    stop = threading.Event()
    count: list[Outcome] = []

    def outcome(done: Outcome) -> None:
        count.append(done)
        if len(count) == published:
            stop.set()

    ctx = Context(project)
    try:
        request = op.Request("daily_revenue", partitions, rate=rate)
        result = op.start(ctx, request, stop, outcome, lambda *_: None, FakeTimer())
    finally:
        ctx.close()
    assert result.status is RunStatus.STOPPED and result.report.published == published
    return result.run_id


def test_a_resumed_run_counts_what_it_published_before(project: Path) -> None:
    from tests.kit import tidegate

    run_id = stopped_after(project, "2025-07-01..2025-07-10", 2)
    resumed = tidegate("backfill", "resume", run_id, "--project", project)
    assert resumed.exit_code == 0, resumed.stderr
    lines = resumed.stdout.splitlines()
    assert f"{run_id}: 10/10 partitions" in lines[-2], lines
    assert lines[-1].startswith(f"{run_id}: succeeded; 8 published (10 of 10 in all)"), lines


class Starts:
    """A live display that keeps the batch starts it is told of."""

    def __init__(self) -> None:
        self.at: list[float] = []

    def batch(self, _index: int, _window: PartitionRange, at: float) -> None:
        self.at.append(at)

    def waiting(self, seconds: float) -> None:
        pass

    def resumed(self, published: int) -> None:
        pass


def test_a_resumed_run_keeps_the_rate_window_of_its_earlier_starts(project: Path) -> None:
    """5 batches start at 5/min and the run stops; its resume, a moment later, must wait for
    them to leave the window before starting the next five."""
    import time

    from tidegate.ops import backfill as op

    stopped_at = time.monotonic()
    run_id = stopped_after(project, "2025-07-01..2025-07-10", 5, rate="5/min")
    timer, starts = FakeTimer(), Starts()
    ctx = Context(project)
    try:
        result = op.resume(
            ctx, run_id, threading.Event(), lambda _: None, lambda *_: None, timer, watch=starts
        )
    finally:
        ctx.close()
    gap = time.monotonic() - stopped_at  # real seconds since the earlier starts, at most
    assert result.report.published == 5 and len(starts.at) == 5
    waited = starts.at[0] - 1000.0
    assert RATE_WINDOW_SECONDS - gap - 1 <= waited <= RATE_WINDOW_SECONDS, (waited, gap)
    assert most_in_any_window(starts.at, RATE_WINDOW_SECONDS) <= 5
