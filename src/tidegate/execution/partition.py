"""Writing one partition through write–audit–publish, recording each step in the ledger."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tidegate.domain.attempt import AttemptState
from tidegate.domain.clock import Clock, stamp
from tidegate.domain.errors import EngineError
from tidegate.domain.ids import new_attempt_id
from tidegate.domain.model import ModelSpec, Source, Version
from tidegate.domain.partitions import IntervalSet, PartitionKey, floor, parse_partition
from tidegate.domain.run import Attempt, Input
from tidegate.engines.base import CommitMarker, Engine, Target, bound_values
from tidegate.execution.audit import audit
from tidegate.execution.crash import crash_point
from tidegate.state.base import StateStore


@dataclass(frozen=True)
class Outcome:
    attempt_id: str
    model: str
    partition: PartitionKey
    label: str
    state: AttemptState
    rows: int | None = None
    checksum: str | None = None
    reason: str | None = None


def staging_name(model: str, attempt_id: str) -> str:
    return f"{model}__{attempt_id}"


@dataclass
class PartitionWriter:
    """Writes partitions of active versions. One writer per warehouse at a time (SPEC §7)."""

    engine: Engine
    state: StateStore
    clock: Clock
    sources: Mapping[str, Source]
    upstream_spec: Callable[[str], ModelSpec]

    def write(self, run_id: str, version: Version, partition: PartitionKey) -> Outcome:
        spec = version.spec
        label = partition.label(spec.keys)
        bounds = bound_values(partition, label if spec.keys else None)
        attempt = Attempt(
            attempt_id=new_attempt_id(),
            run_id=run_id,
            model=spec.name,
            grain=spec.grain.value,
            partition_start=partition.start,
            partition_end=partition.end,
            version_id=version.version_id,
            state=AttemptState.PENDING,
            started_at=stamp(self.clock),
        )
        self.state.create_attempt(attempt)
        crash_point("after_intent")
        outcome = Outcome(attempt.attempt_id, spec.name, partition, label, AttemptState.PENDING)

        try:
            inputs, missing = self._inputs(spec, partition, bounds)
        except EngineError as error:
            self.state.move_attempt(
                attempt.attempt_id, AttemptState.FAILED, stamp(self.clock), error=str(error)
            )
            return _with(outcome, AttemptState.FAILED, reason=str(error))
        if missing:
            reason = f"upstream not ready: {missing}"
            self.state.move_attempt(
                attempt.attempt_id, AttemptState.SKIPPED, stamp(self.clock), error=reason
            )
            return _with(outcome, AttemptState.SKIPPED, reason=reason)
        self.state.record_inputs(attempt.attempt_id, inputs)
        self.state.move_attempt(attempt.attempt_id, AttemptState.RUNNING, stamp(self.clock))

        staging = staging_name(spec.name, attempt.attempt_id)
        try:
            self.engine.stage(staging, version.sql, bounds)
            self.state.move_attempt(attempt.attempt_id, AttemptState.STAGED, stamp(self.clock))
            crash_point("after_stage")
            results = audit(self.engine, spec, staging, bounds)
            self.state.record_checks(attempt.attempt_id, results)
            blocking = [r for r in results if r.blocks]
            if blocking:
                self.engine.drop_staging(staging)
                reason = "; ".join(f"check {r.name} failed: {r.message}" for r in blocking)
                self.state.move_attempt(
                    attempt.attempt_id, AttemptState.FAILED, stamp(self.clock), error=reason
                )
                return _with(outcome, AttemptState.FAILED, reason=reason)
            checksum = self.engine.checksum(staging, [c.name for c in spec.columns])
            self.state.move_attempt(
                attempt.attempt_id,
                AttemptState.AUDITED,
                stamp(self.clock),
                rows=checksum.rows,
                checksum=str(checksum),
            )
            crash_point("after_audit")
            published_at = stamp(self.clock)
            self.engine.publish(
                Target(spec.name, spec.columns, spec.partition_column, bool(spec.keys)),
                staging,
                bounds,
                CommitMarker(
                    attempt_id=attempt.attempt_id,
                    model=spec.name,
                    grain=spec.grain.value,
                    partition_start=partition.start,
                    partition_end=partition.end,
                    run_id=run_id,
                    version_id=version.version_id,
                    checksum=str(checksum),
                    published_at=published_at,
                ),
            )
            crash_point("after_publish")
            self.state.publish(attempt.attempt_id, published_at)
            crash_point("after_ledger")
        except EngineError as error:
            self.engine.drop_staging(staging)
            self.state.move_attempt(
                attempt.attempt_id, AttemptState.FAILED, stamp(self.clock), error=str(error)
            )
            return _with(outcome, AttemptState.FAILED, reason=str(error))
        return _with(outcome, AttemptState.PUBLISHED, rows=checksum.rows, checksum=str(checksum))

    def _inputs(
        self, spec: ModelSpec, partition: PartitionKey, bounds: Mapping[str, Any]
    ) -> tuple[list[Input], str | None]:
        """What the partition reads, or a description of upstream partitions not yet published."""
        inputs: list[Input] = []
        for name in spec.upstream:
            parent = self.upstream_spec(name)
            window = _clip(parent, partition.start, partition.end)
            rows = self.state.partitions(name, floor(parent.grain, window[0]), window[1])
            published = [p for p in rows if p.attempt_id is not None]
            have = IntervalSet.of([(p.partition_start, p.partition_end) for p in published])
            gaps = IntervalSet.of([window]).minus(have)
            if gaps:
                shown = ", ".join(r.label(parent.keys) for r in gaps.ranges(parent.grain))
                return inputs, f"{name} {shown}"
            attempts = tuple(p.attempt_id for p in published if p.attempt_id)
            inputs.append(Input(name, "model", window[0], window[1], None, attempts))
        for source in (self.sources[name] for name in spec.sources):
            fingerprint = self.engine.source_fingerprint(source.table, source.time_column, bounds)
            inputs.append(
                Input(source.name, "source", partition.start, partition.end, str(fingerprint))
            )
        return inputs, None


def _clip(parent: ModelSpec, start: int, end: int) -> tuple[int, int]:
    """The window of `parent` a partition [start, end) reads, from the parent's first partition.

    Key-list partitions have no time window: a model reading one reads all of its keys.
    """
    if parent.keys:
        return 0, len(parent.keys)
    first = parse_partition(parent.start, parent.grain, parent.keys) if parent.start else None
    begin = max(start, first.start) if first else start
    return begin, max(begin, end)


def _with(outcome: Outcome, state: AttemptState, **fields: Any) -> Outcome:
    return Outcome(**{**outcome.__dict__, "state": state, **fields})
