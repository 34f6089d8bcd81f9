"""The coordinator: batches computed and audited in parallel, published one at a time.

Throttled (at most `max_concurrency` batches in flight, at most `rate_per_minute` batch starts
in any sliding minute), stoppable between batches, halted by the first stop-loss that fires.
A batch's worker computes and audits it, then settles it as the publisher: one worker at a time
publishes, on the engine the run opened. The coordinator starts batches and keeps the run's
report: each worker counts what settling its batch did, and the coordinator adds it in.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import cast

from tidegate.crash import crash_point
from tidegate.domain.attempt import AttemptState
from tidegate.domain.backfill import Progress, StopLoss, Trigger, fired, next_start_delay
from tidegate.domain.checksum import Checksum
from tidegate.domain.clock import Clock, Timer, stamp
from tidegate.domain.command import job_redactor
from tidegate.domain.errors import EngineError, FencedError
from tidegate.domain.ids import new_attempt_id
from tidegate.domain.model import ModelKind, ModelSpec, Program, Source, Version, WriteMode
from tidegate.domain.partitions import PartitionKey, PartitionRange
from tidegate.domain.run import Attempt, Audit
from tidegate.domain.secrets import Redactor, Secrets
from tidegate.domain.taint import TaintPolicy
from tidegate.domain.throttle import AdaptiveThrottle, Adjustment
from tidegate.engines.base import AheadWriter, CommitMarker, Engine, Fence, Target
from tidegate.execution.inputs import ReadPlan, read_inputs
from tidegate.execution.read_ahead import Stretch, Upcoming
from tidegate.execution.unit import Computed, QueryStager, ReadFrom, Stager, Unit, compute
from tidegate.execution.update import Limits, measure, publish_update
from tidegate.execution.upstream_marks import mark_diverged
from tidegate.state.base import StateStore

STOP_POLL_SECONDS = 0.5
NO_STOP_LOSS = StopLoss(halt_on_check_failure=False, halt_on_reconciliation_mismatch=False)


@dataclass(frozen=True)
class Outcome:
    model: str
    partition: PartitionKey
    label: str
    attempt_id: str
    state: AttemptState
    rows: int | None = None
    checksum: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Options:
    max_concurrency: int = 1
    # how many batches the execute runs, when known: DuckDB's cores are not set aside for
    # more batches than that (one batch of a whole month keeps all of them)
    batches: int | None = None
    rate_per_minute: int | None = None
    # the run's batch starts before this execute, on the timer's clock (a resume's): the
    # sliding window carries on from them
    earlier_starts: tuple[float, ...] = ()
    stop_loss: StopLoss = NO_STOP_LOSS
    stop_requested: Callable[[], bool] = lambda: False
    on_outcome: Callable[[Outcome], None] = lambda _: None
    on_batch: Callable[[int, PartitionRange, float], None] = lambda *_: None
    # no batch starts for this many seconds more: the rate's window is full (called as the
    # wait passes, every STOP_POLL_SECONDS at most)
    on_wait: Callable[[float], None] = lambda _: None
    # publish each partition whole, replacing its rows, whatever the model's write mode: a
    # recovery rebuilds what was contaminated (a merge or an append would keep the bad rows)
    rebuild: bool = False
    # a distributed batch's lease: the warehouse refuses its publishes once a newer lease of
    # its partitions raised their fences, and none starts once the lease is no longer held
    fence: Fence | None = None
    lease_held: Callable[[], bool] = lambda: True
    # an update model's transaction bounds and tries (flags over the model's declaration)
    limits: Limits = field(default_factory=Limits)
    # slows batch starts down while batches take longer than its bound (None: off)
    adaptive: AdaptiveThrottle | None = None
    on_throttle: Callable[[Adjustment], None] = lambda _: None


def publish_target(spec: ModelSpec, rebuild: bool = False) -> Target:
    """Where and how a model's partitions are published (`rebuild`: each replaced whole)."""
    return Target(
        spec.name,
        spec.columns,
        spec.partition_column,
        spec.single_unit,
        write_mode=WriteMode.OVERWRITE if rebuild else spec.write_mode,
        unique_key=spec.unique_key,
        grain=None if spec.single_unit else spec.grain.value,
        cursor=spec.cursor is not None,
    )


def _markers(
    run_id: str, version: Version, computed: Computed, published_at: str
) -> list[CommitMarker]:
    """The commit markers of a computed unit's partitions."""
    attempts = computed.unit.attempts
    return [
        CommitMarker(
            attempt_id=attempts[p.start],
            model=version.spec.name,
            grain=version.spec.grain.value,
            partition_start=p.start,
            partition_end=p.end,
            run_id=run_id,
            version_id=version.version_id,
            checksum=str(computed.checksums[p.start]),
            published_at=published_at,
        )
        for p in computed.unit.partitions
    ]


def in_flight_limit(version: Version, options: Options) -> int:
    """How many batches run at once: one where a check reads what the batch before published
    (a check against the previous partition)."""
    return 1 if version.spec.judged_against_previous else options.max_concurrency


def batches_at_once(version: Version, options: Options) -> int:
    """How many batches can be in flight together: the limit, or fewer when the execute has
    fewer batches."""
    limit = in_flight_limit(version, options)
    return limit if options.batches is None else max(1, min(limit, options.batches))


@dataclass
class Report:
    published: int = 0
    failed: int = 0
    skipped: int = 0
    rows: int = 0
    progress: Progress = field(default_factory=Progress)
    trigger: Trigger | None = None
    stopped: bool = False
    # why the first partition refused for an upstream diverged from the warehouse was refused
    refusal: str | None = None

    def add(self, settled: Report) -> None:
        """Count in what settling one batch did (its source rows are counted as it reads
        them)."""
        self.published += settled.published
        self.failed += settled.failed
        self.skipped += settled.skipped
        self.rows += settled.rows
        self.refusal = self.refusal or settled.refusal
        mine, theirs = self.progress, settled.progress
        self.progress = replace(
            mine,
            done=mine.done + theirs.done,
            failed=mine.failed + theirs.failed,
            check_failures=mine.check_failures + theirs.check_failures,
            failed_check=mine.failed_check or theirs.failed_check,
            reconciliation_mismatches=mine.reconciliation_mismatches
            + theirs.reconciliation_mismatches,
        )


@dataclass
class Tally:
    """What settling one batch did, counted on the worker that settled it; the coordinator
    adds it to the run's report and passes its outcomes on, in the order they happened."""

    report: Report = field(default_factory=Report)
    outcomes: list[Outcome] = field(default_factory=list)
    # the batch's last partition settled: where a stop-loss it fires is placed
    last_label: str = ""


@dataclass
class Executor:
    engine: Engine
    state: StateStore
    clock: Clock
    timer: Timer
    sources: Mapping[str, Source]
    upstream_spec: Callable[[str], ModelSpec]
    # a partition whose upstream input is tainted: skipped, or published tainted too
    taint_policy: TaintPolicy = TaintPolicy.BLOCK
    # how a unit's rows are computed: the SELECT, or the program of a Python, command or dbt
    # model
    stager: Stager = field(default_factory=QueryStager)
    # prefixes this process's staging tables: workers sharing a warehouse stage side by side
    staging_prefix: str = ""
    # keep the slots' engine handles from one execute to the next (a worker's batches)
    keep_handles: bool = False
    # partition start → the earlier attempt whose rows a restore publishes again: its inputs
    # are recorded, not what the batch read now (the rows were computed from those)
    inputs_from: Mapping[int, str] = field(default_factory=dict)
    # the project's secrets: masked in every reason an attempt ends with
    secrets: Secrets = field(default_factory=Secrets)
    # the masking of each program (None: an SQL model), made once: its pattern of secrets is
    # compiled once a run, not per batch
    _redactors: dict[Program | None, Redactor] = field(default_factory=dict, init=False, repr=False)

    def execute(
        self,
        run_id: str,
        version: Version,
        batches: Iterable[tuple[int, PartitionRange]],
        options: Options,
    ) -> Report:
        report = Report()
        self._aborted.clear()
        with (
            self._sharing_cores(batches_at_once(version, options)),
            self._handles(options.max_concurrency) as (slots, opened),
            ThreadPoolExecutor(
                max_workers=options.max_concurrency, thread_name_prefix="tidegate-batch"
            ) as pool,
        ):
            pending: Iterator[tuple[int, PartitionRange]] = iter(batches)
            frozen = self._frozen_sources(version, options)
            upcoming = Upcoming(pending, frozen) if frozen else None
            try:
                self._loop(
                    run_id, version, upcoming or pending, options, report, pool, slots, opened
                )
            except BaseException as error:
                # The coordinator stopped on an error or a second Ctrl-C: no worker publishes
                # after it, as no batch started after it.
                self._aborted.set()
                if isinstance(error, KeyboardInterrupt):
                    # A second Ctrl-C aborts the batches in flight too. A worker in the middle
                    # of a publish has its statement interrupted (its transaction rolls back);
                    # one between two of its statements commits, as if the Ctrl-C had come a
                    # moment later.
                    pool.shutdown(wait=False, cancel_futures=True)
                    for handle in (*opened, self.engine):
                        handle.interrupt()
                    self.stager.interrupt()
                raise
        return report

    def _loop(
        self,
        run_id: str,
        version: Version,
        pending: Iterator[tuple[int, PartitionRange]],
        options: Options,
        report: Report,
        pool: ThreadPoolExecutor,
        slots: queue.Queue[int],
        handles: list[Engine],
    ) -> None:
        began = self.timer.monotonic()
        in_flight = in_flight_limit(version, options)
        starts: list[float] = list(options.earlier_starts)
        inflight: dict[Future[Tally], Batch] = {}
        exhausted = False
        ready: tuple[int, PartitionRange] | None = None
        adaptive = options.adaptive

        def check_stop_loss() -> None:
            report.progress = replace(
                report.progress, elapsed_seconds=self.timer.monotonic() - began
            )
            if report.trigger is None:
                report.trigger = fired(options.stop_loss, report.progress, self._last_label)

        while True:
            for future in [f for f in inflight if f.done()]:
                tally = future.result()
                settled = inflight.pop(future)
                report.add(tally.report)
                _count_reads(report, [settled])
                for outcome in tally.outcomes:
                    options.on_outcome(outcome)
                self._last_label = tally.last_label or self._last_label
                if adaptive is not None:
                    latency = self.timer.monotonic() - settled.started
                    adaptive, adjustment = adaptive.observe(settled.index, latency)
                    if adjustment is not None:
                        options.on_throttle(adjustment)
                check_stop_loss()
            if report.trigger is None and not report.stopped and options.stop_requested():
                report.stopped = True
            halted = report.trigger is not None or report.stopped
            if (halted or exhausted) and not inflight:
                return
            if halted or exhausted or len(inflight) >= in_flight:
                wait(inflight, return_when=FIRST_COMPLETED)
                continue
            if options.stop_loss.max_source_rows is not None:
                # a source-row budget must be judged before another batch reads more
                _await_reads(inflight)
                _count_reads(report, inflight.values())
                check_stop_loss()
                if report.trigger is not None:
                    continue
            if ready is None:
                # the next batch is taken before any rate wait: with none left, the run ends
                # now instead of holding the warehouse for a slot nothing would use
                ready = next(pending, None)
                if ready is None:
                    exhausted = True
                    continue
            now = self.timer.monotonic()
            delay = next_start_delay(starts, now, options.rate_per_minute)
            if adaptive is not None:
                delay = max(delay, adaptive.delay(starts[-1] if starts else None, now))
            if delay > 0:
                options.on_wait(delay)
                # wait in short slices: a stop request is seen within STOP_POLL_SECONDS
                pause = min(delay, STOP_POLL_SECONDS)
                if inflight:
                    wait(inflight, timeout=pause, return_when=FIRST_COMPLETED)
                else:
                    self.timer.sleep(pause)
                continue
            (index, batch), ready = ready, None
            starts.append(self.timer.monotonic())
            # only the newest `rate` starts matter to the sliding window: memory stays bounded
            del starts[: -(options.rate_per_minute or 1)]
            options.on_batch(index, batch, starts[-1])
            intent = self._intend(run_id, version, index, batch)
            intent.started = starts[-1]
            if isinstance(pending, Upcoming):
                intent.stretch = pending.stretch(batch)
            inflight[
                pool.submit(self._run_batch, slots, handles, version, intent, run_id, options)
            ] = intent
            # wall time and batches that failed before computing: checked before another batch
            # starts; the source-row budget is checked once a batch has read its inputs
            self._last_label = batch.label(version.spec.keys).split("..")[-1]
            check_stop_loss()

    # the last partition the coordinator prepared or finished: where a stop-loss fires
    _last_label: str = field(default="", init=False)
    _reading: dict[str, dict[str, ReadFrom]] = field(default_factory=dict, init=False)
    _kept: list[Engine] = field(default_factory=list, init=False)
    # held by the worker that publishes: one publish at a time, on `engine`
    _publisher: threading.Lock = field(default_factory=threading.Lock, init=False)
    # set when the coordinator stops on an error or a second Ctrl-C: no worker publishes after it
    _aborted: threading.Event = field(default_factory=threading.Event, init=False)

    def _frozen_sources(self, version: Version, options: Options) -> frozenset[str]:
        """The sources a batch may read ahead of time: those no other process can change
        while the warehouse is open, read by an SQL model of time partitions (a Python,
        command or dbt model's program could write to the warehouse). A source-row budget
        counts what is read: with one, every batch reads only its own window."""
        spec = version.spec
        if (
            spec.kind is not ModelKind.SQL
            or not spec.grain.is_time
            or spec.update is not None
            or options.stop_loss.max_source_rows is not None
        ):
            return frozenset()
        return frozenset(
            name for name in spec.sources if self.engine.frozen_while_open(self.sources[name].table)
        )

    @contextmanager
    def _sharing_cores(self, batches_in_flight: int) -> Iterator[None]:
        self.engine.share_cores(batches_in_flight)
        try:
            yield
        except BaseException:
            # the error that cut the batches short is the one to report
            with suppress(EngineError):
                self.engine.share_cores(1)
            raise
        self.engine.share_cores(1)

    @contextmanager
    def _handles(self, count: int) -> Iterator[tuple[queue.Queue[int], list[Engine]]]:
        """One engine handle per worker slot. A slot is free again only once its worker has
        published or dropped its staging table, so a slot's staging name (and the
        statements built for it) can be reused without one unit overwriting another's rows.
        With `keep_handles`, the handles (and the statements they built) outlive the call, for
        the next batch of a worker: close() releases them."""
        slots: queue.Queue[int] = queue.Queue()
        opened = self._kept[:count]
        opened += [self.engine.handle() for _ in range(count - len(opened))]
        for slot in range(count):
            slots.put(slot)
        try:
            yield slots, opened
        finally:
            if self.keep_handles:
                self._kept = opened
            else:
                for handle in opened:
                    handle.close()

    def close(self) -> None:
        """Release the handles kept between calls."""
        for handle in self._kept:
            handle.close()
        self._kept = []

    def _run_batch(
        self,
        slots: queue.Queue[int],
        handles: list[Engine],
        version: Version,
        intent: Batch,
        run_id: str,
        options: Options,
    ) -> Tally:
        """On a worker: compute and audit the batch in a slot, then settle it as the
        publisher. The slot's staging tables stay reserved until they are published or
        dropped."""
        slot = slots.get()
        try:
            work = self._work(handles[slot], slot, version, intent)
            self._write_ahead(handles[slot], run_id, version, work, options)
            tally = Tally()
            with self._publisher:
                if not self._aborted.is_set():
                    self._settle_batch(run_id, version, intent, work, tally, options)
            return tally
        finally:
            slots.put(slot)

    def _work(self, engine: Engine, slot: int, version: Version, intent: Batch) -> Work:
        """Read the batch's inputs, then stage and audit each unit whose inputs are
        complete."""
        spec = version.spec
        try:
            try:
                plan = read_inputs(
                    engine,
                    self.state,
                    spec,
                    self.sources,
                    self.upstream_spec,
                    intent.window,
                    intent.partitions,
                    self.taint_policy,
                    intent.stretch,
                )
                intent.source_rows = plan.source_rows
            except EngineError as error:
                return Work(error=str(error))
            finally:
                intent.inputs_read.set()
            ready = [p for p in intent.partitions if p.start not in plan.missing]
            for p in ready:
                if p.start in self.inputs_from:
                    plan.inputs[p.start] = self.state.inputs(self.inputs_from[p.start])
            if ready:
                self.state.record_inputs_many(
                    {intent.attempts[p.start]: plan.inputs[p.start] for p in ready}
                )
                self.state.move_attempts(
                    [(intent.attempts[p.start], None, None, None) for p in ready],
                    AttemptState.RUNNING,
                    stamp(self.clock),
                )
            units = [
                Unit.reading(
                    plan, spec.span(run[0].start, run[-1].end), run, intent.attempts, intent.index
                )
                for run in _consecutive(ready)
            ]
            if spec.update is not None:
                for unit in units:
                    self._staged(unit)  # an update stages nothing: its publish computes
                return Work(plan, [self._audited(measure(engine, spec, u)) for u in units])
            read_from = self._read_from(version)
            computed = [
                self._audited(
                    compute(
                        engine,
                        version,
                        unit,
                        read_from,
                        self._staged,
                        self.staging_prefix + _staging(spec, slot, n),
                        self.stager,
                    )
                )
                for n, unit in enumerate(units)
            ]
            return Work(plan, computed)
        except BaseException:
            intent.inputs_read.set()
            raise

    def _write_ahead(
        self, engine: Engine, run_id: str, version: Version, work: Work, options: Options
    ) -> None:
        """On the worker, what the publish of each unit that passed its audit can write before
        it commits (an Iceberg table's files): the publisher, one batch at a time, then only
        commits."""
        spec = version.spec
        if not engine.capabilities.writes_ahead or spec.update is not None:
            return
        target = publish_target(spec, options.rebuild)
        for computed in work.computed:
            unit = computed.unit
            if computed.error is not None or not computed.checksums:
                continue
            if any(computed.problems(p.start) for p in unit.partitions):
                continue
            markers = _markers(run_id, version, computed, stamp(self.clock))
            cast(AheadWriter, engine).write_ahead(
                target, computed.staging, unit.bounds(spec), markers
            )

    def _audited(self, computed: Computed) -> Computed:
        """Record a unit's audit on its worker: the checks and checksums of what it staged, or
        the checks that stopped it before a checksum."""
        attempts = computed.unit.attempts
        if computed.error is not None or not computed.checksums:
            for start, results in computed.checks.items():
                self.state.record_checks(attempts[start], results)
            return computed
        self.state.record_audits(
            [
                Audit(
                    attempts[p.start],
                    computed.checksums[p.start].rows,
                    str(computed.checksums[p.start]),
                    tuple(computed.checks[p.start]),
                    tuple(computed.reconciliations.get(p.start, [])),
                )
                for p in computed.unit.partitions
            ],
            stamp(self.clock),
        )
        crash_point("after_audit")
        return computed

    def _staged(self, unit: Unit) -> None:
        self.state.move_attempts(
            [(a, None, None, None) for a in unit.attempts.values()],
            AttemptState.STAGED,
            stamp(self.clock),
        )

    def _read_from(self, version: Version) -> dict[str, ReadFrom]:
        """Where the version's reconciliations read their inputs: resolved once per run."""
        known = self._reading.get(version.version_id)
        if known is None:
            known = self._reading[version.version_id] = reading_of(
                version.spec, self.sources, self.upstream_spec
            )
        return known

    def _intend(self, run_id: str, version: Version, index: int, window: PartitionRange) -> Batch:
        """Record the intent for every partition of the batch before anything is computed."""
        spec = version.spec
        partitions = tuple(window)
        now = stamp(self.clock)
        attempts = [
            Attempt(
                attempt_id=new_attempt_id(),
                run_id=run_id,
                model=spec.name,
                grain=spec.grain.value,
                partition_start=p.start,
                partition_end=p.end,
                version_id=version.version_id,
                state=AttemptState.PENDING,
                started_at=now,
            )
            for p in partitions
        ]
        self.state.create_attempts(attempts, batch=index)
        crash_point("after_intent")
        return Batch(index, window, partitions, {a.partition_start: a.attempt_id for a in attempts})

    def _settle_batch(
        self,
        run_id: str,
        version: Version,
        intent: Batch,
        work: Work,
        tally: Tally,
        options: Options,
    ) -> None:
        """As the publisher: end what could not run, then publish unit by unit."""
        spec = version.spec
        partitions = list(intent.partitions)
        if work.plan is None:
            reason = work.error or "inputs were not read"
            self._fail(
                spec,
                partitions,
                intent.attempts,
                dict.fromkeys(intent.attempts, reason),
                tally,
            )
            return
        plan = work.plan
        if plan.diverged:
            mark_diverged(self.state, self.clock, run_id, plan.diverged)
        skipped = [p for p in partitions if p.start in plan.missing]
        tally.report.refusal = next(
            (plan.missing[p.start] for p in skipped if p.start in plan.refused), None
        )
        if skipped:
            self._settle(spec, skipped, intent.attempts, plan.missing, AttemptState.SKIPPED, tally)
        for computed in work.computed:
            self._finish(run_id, version, computed.unit, computed, tally, options)

    def _finish(
        self,
        run_id: str,
        version: Version,
        unit: Unit,
        computed: Computed,
        tally: Tally,
        options: Options,
    ) -> None:
        spec = version.spec
        attempts = unit.attempts
        tally.last_label = unit.partitions[-1].label(spec.keys)
        if computed.error is not None or not computed.checksums:
            reason = computed.error or "; ".join(computed.problems(unit.partitions[0].start))
            self.engine.drop_staging(computed.staging)
            self._fail(
                spec,
                list(unit.partitions),
                attempts,
                {p.start: reason for p in unit.partitions},
                tally,
                check_failure=computed.error is None,
            )
            return
        problems = {p.start: computed.problems(p.start) for p in unit.partitions}
        if any(problems.values()):
            first = next(p for p in unit.partitions if problems[p.start])
            reasons = {
                p.start: "; ".join(problems[p.start])
                or f"not published: {first.label(spec.keys)} in the same batch failed"
                for p in unit.partitions
            }
            self.engine.drop_staging(computed.staging)
            mismatch = any(not r.passed for rs in computed.reconciliations.values() for r in rs)
            self._fail(
                spec,
                list(unit.partitions),
                attempts,
                reasons,
                tally,
                failed_check=next(
                    (
                        f"{r.name}: {r.message}"
                        for p in unit.partitions
                        for r in computed.checks.get(p.start, [])
                        if r.blocks
                    ),
                    None,
                ),
                mismatch=mismatch,
            )
            return
        refused = None if options.rebuild else self._republish_refusal(spec, unit)
        if refused is not None:
            self.engine.drop_staging(computed.staging)
            self._fail(spec, list(unit.partitions), attempts, refused, tally)
            return
        content = self._publish(run_id, version, unit, computed, tally, options)
        if content is None:
            return
        published = [p for p in unit.partitions if p.start in content]
        for p in published:
            checksum = content[p.start]
            tally.report.published += 1
            tally.report.rows += checksum.rows
            tally.outcomes.append(
                Outcome(
                    spec.name,
                    p,
                    p.label(spec.keys),
                    attempts[p.start],
                    AttemptState.PUBLISHED,
                    checksum.rows,
                    str(checksum),
                )
            )
        tally.report.progress = replace(
            tally.report.progress, done=tally.report.progress.done + len(published)
        )

    def _publish(
        self,
        run_id: str,
        version: Version,
        unit: Unit,
        computed: Computed,
        tally: Tally,
        options: Options,
    ) -> dict[int, Checksum] | None:
        """Publish a unit in the warehouse, then in the ledger: what each partition holds
        afterwards (the staged rows for overwrite; for merge and append what the engine
        measured in the publish's transaction, which the markers carry and the ledger
        records). None when the publish failed (its attempts failed, nothing written); for an
        update model, whose ranges publish one transaction each, the ranges published before
        one failed (the failed ones settled)."""
        spec = version.spec
        attempts = unit.attempts
        published_at = stamp(self.clock)
        markers = _markers(run_id, version, computed, published_at)
        if spec.update is not None:
            return self._publish_update(spec, unit, markers, tally, options)
        target = publish_target(spec, options.rebuild)
        try:
            if not options.lease_held():
                raise FencedError(
                    "fenced: this worker's lease expired or was taken over (its token is "
                    "stale); nothing was published"
                )
            crash_point("before_publish")
            measured = self.engine.publish(
                target, computed.staging, unit.bounds(spec), markers, options.fence
            )
        except FencedError:
            # another worker holds the batch now and settles these attempts: write nothing more
            self.engine.drop_staging(computed.staging)
            raise
        except EngineError as error:
            self.engine.drop_staging(computed.staging)
            reasons = {p.start: str(error) for p in unit.partitions}
            self._fail(spec, list(unit.partitions), attempts, reasons, tally)
            return None
        crash_point("after_publish")
        content = {
            p.start: measured.get(p.start, computed.checksums[p.start]) for p in unit.partitions
        }
        changed = {
            attempts[start]: (checksum.rows, str(checksum))
            for start, checksum in content.items()
            if checksum != computed.checksums[start]
        }
        if changed:
            self.state.record_published_content(changed)
        self.state.publish_many([attempts[p.start] for p in unit.partitions], published_at)
        crash_point("after_ledger")
        return content

    def _publish_update(
        self,
        spec: ModelSpec,
        unit: Unit,
        markers: list[CommitMarker],
        tally: Tally,
        options: Options,
    ) -> dict[int, Checksum] | None:
        """An update model's publish: per range, the UPDATE, its audit and its marker in one
        warehouse transaction, then the ledger (execution/update.py). What the published ranges
        hold; the first refused range and those after it fail (nothing of them written). None
        when no range was published."""
        outcome = publish_update(
            self.engine, self.state, self.timer, spec, markers, options.limits, options.lease_held
        )
        if outcome.refused is None:
            return outcome.content
        refused, first = outcome.refused, outcome.refused_start
        failed = [p for p in unit.partitions if p.start not in outcome.content]
        label = next(p.label(spec.keys) for p in failed if p.start == first)
        self._fail(
            spec,
            failed,
            {p.start: unit.attempts[p.start] for p in failed},
            {
                p.start: refused.reason
                if p.start == first
                else f"not published: {label} in the same batch failed"
                for p in failed
            },
            tally,
            check_failure=refused.check_failure,
            mismatch=refused.mismatch,
        )
        return outcome.content or None

    def _republish_refusal(self, spec: ModelSpec, unit: Unit) -> dict[int, str] | None:
        """Why a unit must not publish, when its model appends without a unique key and one of
        its partitions is published already (a second append would duplicate its rows); the
        engine refuses it too, from its commit markers."""
        if not spec.duplicates_on_republish:
            return None
        published = {
            p.start: row
            for p in unit.partitions
            if (row := self.state.partition(spec.name, p.start)) is not None
            and row.attempt_id is not None
        }
        if not published:
            return None
        first = next(p for p in unit.partitions if p.start in published)
        return {
            p.start: (
                f"append without a unique key publishes a partition once: "
                f"{p.label(spec.keys)} was published by run {published[p.start].run_id}, and "
                "appending again would duplicate its rows; nothing was written"
                if p.start in published
                else f"not published: {first.label(spec.keys)} in the same batch is published "
                "already (append without a unique key)"
            )
            for p in unit.partitions
        }

    def _fail(
        self,
        spec: ModelSpec,
        partitions: list[PartitionKey],
        attempts: Mapping[int, str],
        reasons: Mapping[int, str],
        tally: Tally,
        check_failure: bool = False,
        mismatch: bool = False,
        failed_check: str | None = None,
    ) -> None:
        tally.last_label = partitions[-1].label(spec.keys)
        self._settle(spec, partitions, attempts, reasons, AttemptState.FAILED, tally)
        progress = tally.report.progress
        tally.report.progress = replace(
            progress,
            done=progress.done + len(partitions),
            failed=progress.failed + len(partitions),
            check_failures=progress.check_failures + int(check_failure or bool(failed_check)),
            failed_check=progress.failed_check or failed_check,
            reconciliation_mismatches=progress.reconciliation_mismatches + int(mismatch),
        )

    def _settle(
        self,
        spec: ModelSpec,
        partitions: list[PartitionKey],
        attempts: Mapping[int, str],
        reasons: Mapping[int, str],
        state: AttemptState,
        tally: Tally,
    ) -> None:
        """End attempts without publishing (failed or skipped), with their reasons."""
        ids = {p.start: attempts[p.start] for p in partitions}
        # Every attempt that ends without publishing ends here, whatever failed (a model's code,
        # its job, the warehouse): its reason goes to the ledger (attempts.error,
        # partitions.last_error) and to what the command prints, so it is masked here, once.
        redact = self._redactors.get(spec.program)
        if redact is None:
            redact = self._redactors[spec.program] = job_redactor(spec.program, self.secrets)
        reasons = {p.start: redact(reasons[p.start]) for p in partitions}
        self.state.move_attempts(
            [(ids[p.start], None, None, reasons[p.start]) for p in partitions],
            state,
            stamp(self.clock),
        )
        for p in partitions:
            if state is AttemptState.SKIPPED:
                tally.report.skipped += 1
            else:
                tally.report.failed += 1
            tally.outcomes.append(
                Outcome(
                    spec.name, p, p.label(spec.keys), ids[p.start], state, reason=reasons[p.start]
                )
            )


@dataclass
class Batch:
    """A batch whose intent is recorded: partition start → its attempt id. The worker sets
    `inputs_read` once it knows how many source rows the batch reads."""

    index: int
    window: PartitionRange
    partitions: tuple[PartitionKey, ...]
    attempts: dict[int, str]
    inputs_read: threading.Event = field(default_factory=threading.Event)
    source_rows: int = 0
    counted: bool = False
    # when the coordinator started it (the timer's clock): a batch's latency ends at its settle
    started: float = 0.0
    # the upcoming batches' window it may read its sources in (read_ahead.py)
    stretch: Stretch | None = None


@dataclass(frozen=True)
class Work:
    """What a worker did with a batch: its inputs, and each unit staged and audited (or why
    its inputs could not be read)."""

    plan: ReadPlan | None = None
    computed: list[Computed] = field(default_factory=list)
    error: str | None = None


def reading_of(
    spec: ModelSpec, sources: Mapping[str, Source], upstream_spec: Callable[[str], ModelSpec]
) -> dict[str, ReadFrom]:
    """Where a model's reconciliations read their input side: each source's table and each
    upstream model's published table, with its time column."""
    found = {
        name: ReadFrom(sources[name].table, sources[name].time_column) for name in spec.sources
    }
    for name in spec.upstream:
        found[name] = ReadFrom(name, upstream_spec(name).partition_column)
    return found


def _await_reads(inflight: Mapping[Future[Tally], Batch]) -> None:
    for future, batch in inflight.items():
        while not batch.inputs_read.wait(STOP_POLL_SECONDS) and not future.done():
            pass


def _count_reads(report: Report, batches: Iterable[Batch]) -> None:
    """Add the source rows of batches that have read their inputs, each batch once."""
    for batch in batches:
        if not batch.counted and batch.inputs_read.is_set():
            batch.counted = True
            report.progress = replace(
                report.progress, source_rows=report.progress.source_rows + batch.source_rows
            )


def _staging(spec: ModelSpec, slot: int, unit: int) -> str:
    """A slot's staging table for the n-th unit of its batch (a gap splits a batch in units)."""
    return f"{spec.name}__slot{slot}" if unit == 0 else f"{spec.name}__slot{slot}_{unit}"


def _consecutive(partitions: list[PartitionKey]) -> Iterator[list[PartitionKey]]:
    """Split partitions into runs without gaps (each run becomes one unit)."""
    run: list[PartitionKey] = []
    for partition in partitions:
        if run and (run[-1].end != partition.start or partition.grain.value == "key"):
            yield run
            run = []
        run.append(partition)
    if run:
        yield run
