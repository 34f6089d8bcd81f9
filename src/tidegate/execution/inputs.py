"""What a batch of partitions reads, and whether its inputs are complete.

A partition runs only when every upstream model partition in its window is published and each
source it reads has rows in its window: missing input means `skipped`, never published empty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tidegate.domain.checksum import Checksum
from tidegate.domain.completeness import min_rows_of
from tidegate.domain.cursor import cursor_bounds
from tidegate.domain.model import CheckSpec, ModelSpec, Reconciliation, Source
from tidegate.domain.partitions import (
    EVERYTHING,
    Grain,
    IntervalSet,
    PartitionKey,
    PartitionRange,
    floor,
)
from tidegate.domain.run import Input, PublishedPartition
from tidegate.domain.taint import MarkKind, TaintedPartition, TaintPolicy
from tidegate.engines.base import Engine, bound_values
from tidegate.execution.read_ahead import Stretch, source_pass
from tidegate.execution.upstream_check import Divergence, diverged, refusal
from tidegate.execution.upstream_marks import WAREHOUSE_KINDS
from tidegate.state.base import StateStore


@dataclass(frozen=True)
class ReadPlan:
    """Per partition start: the inputs it reads, or why it cannot run yet."""

    inputs: dict[int, list[Input]]
    missing: dict[int, str]
    source_rows: int
    # per partition start: reconciliation name → the source side's value, read in the same pass
    source_values: dict[int, dict[str, str | None]]
    # per partition start: relative row_count check name → the rows it compares with (a
    # source's rows in the window, counted in the same pass, or the previous partition's
    # published rows in the ledger; None: no previous partition is published)
    baselines: dict[int, dict[str, int | None]] = field(default_factory=dict)
    # upstream partitions the ledger says are published that the warehouse does not hold,
    # and the partitions refused for reading one
    diverged: tuple[Divergence, ...] = ()
    refused: frozenset[int] = frozenset()
    # per partition start: each source's and upstream model's rows in its window
    input_rows: dict[int, dict[str, int]] = field(default_factory=dict)
    # the inputs whose min_rows is 0: where they hold no rows, a partition may be empty and
    # reconcile nothing against nothing
    empty_ok: frozenset[str] = frozenset()


def read_inputs(
    engine: Engine,
    state: StateStore,
    spec: ModelSpec,
    sources: Mapping[str, Source],
    upstream_spec: Callable[[str], ModelSpec],
    batch: PartitionRange,
    partitions: Sequence[PartitionKey],
    taint_policy: TaintPolicy = TaintPolicy.BLOCK,
    stretch: Stretch | None = None,
) -> ReadPlan:
    """`stretch`: the upcoming batches' window this batch may read its sources in (see
    read_ahead.py); without it, each source is read in the batch's window."""
    if spec.cursor is not None:
        return _cursor_inputs(engine, spec, sources, partitions)
    inputs: dict[int, list[Input]] = {p.start: [] for p in partitions}
    missing: dict[int, str] = {}
    upstream = _Upstream(inputs, missing)
    for name in spec.upstream:
        parent = upstream_spec(name)
        need = min_rows_of(parent, sources, upstream_spec)
        upstream.read(engine, state, spec, parent, need, batch, partitions, taint_policy)
    source_rows = 0
    source_values: dict[int, dict[str, str | None]] = {}
    baselines = _published_previous(state, spec, batch, partitions)
    counting = _relative_checks(spec, "source")
    for source in (sources[name] for name in spec.sources):
        rules = [r for r in spec.reconciliations if r.source == source.name]
        if spec.keys or not source.time_column or source.name in spec.whole_reads:
            # a whole-table model reads every row, and reconciles with all of them, as every
            # partition reads a source without a time column: the partition predicate of no
            # column holds every row
            column = (
                spec.key_column_in(source.name)
                if spec.keys and spec.grain is not Grain.TABLE
                else ""
            )
            whole: _SourceRead | None = None
            for partition in partitions:
                # every row: read once for the batch
                keyed = whole or _key_rows(engine, spec, source, column, partition, rules)
                whole = keyed if column == "" else None
                source_values.setdefault(partition.start, {}).update(keyed.values)
                if column is not None and keyed.checksum.rows < source.min_rows:
                    held = f" holding key {partition.label(spec.keys)}" if column else ""
                    missing.setdefault(
                        partition.start,
                        f"source {source.name} has {keyed.checksum.rows} row(s){held} "
                        f"(at least {source.min_rows} expected)",
                    )
                    continue
                source_rows += keyed.checksum.rows
                upstream.rows[partition.start][source.name] = keyed.checksum.rows
                _set_source_rows(
                    baselines, counting, source.name, partition.start, keyed.checksum.rows
                )
                inputs[partition.start].append(
                    Input(
                        source.name, "source", partition.start, partition.end, str(keyed.checksum)
                    )
                )
            continue
        aggregates = [r.source_expression for r in rules]
        profiles = (
            source_pass(engine, source, spec.grain.value, aggregates, batch.start, batch.end)
            if stretch is None
            else stretch.profiles(engine, source, spec.grain.value, aggregates, batch)
        )
        for partition in partitions:
            found = profiles.get(partition.start)
            values = found.values if found else (None,) * len(rules)
            for rule, value in zip(rules, values, strict=True):
                source_values.setdefault(partition.start, {})[rule.name] = value
            profile = found.checksum if found else Checksum(0, 0)
            _set_source_rows(baselines, counting, source.name, partition.start, profile.rows)
            upstream.rows[partition.start][source.name] = profile.rows
            if profile.rows < source.min_rows:
                missing.setdefault(
                    partition.start,
                    f"source {source.name} has {profile.rows} row(s) in the partition's window "
                    f"(at least {source.min_rows} expected)",
                )
                continue
            source_rows += profile.rows
            inputs[partition.start].append(
                Input(source.name, "source", partition.start, partition.end, str(profile))
            )
    empty_ok = {s for s in spec.sources if sources[s].min_rows == 0} | upstream.empty_ok
    return ReadPlan(
        inputs,
        missing,
        source_rows,
        source_values,
        baselines,
        *upstream.found(),
        input_rows=upstream.rows,
        empty_ok=frozenset(empty_ok),
    )


@dataclass
class _Upstream:
    """What a batch reads of its upstream models: each partition's inputs, or why it cannot
    run (`missing`, shared with the sources' reads)."""

    inputs: dict[int, list[Input]]
    missing: dict[int, str]
    diverged: list[Divergence] = field(default_factory=list)
    refused: set[int] = field(default_factory=set)
    # per partition start: each input's rows in its window (the sources' added as read)
    rows: dict[int, dict[str, int]] = field(init=False)
    empty_ok: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.rows = {start: {} for start in self.inputs}

    def found(self) -> tuple[tuple[Divergence, ...], frozenset[int]]:
        return tuple(self.diverged), frozenset(self.refused)

    def read(
        self,
        engine: Engine,
        state: StateStore,
        spec: ModelSpec,
        parent: ModelSpec,
        need: int,
        batch: PartitionRange,
        partitions: Sequence[PartitionKey],
        taint_policy: TaintPolicy,
    ) -> None:
        """Each partition's window of `parent`: published in the ledger, held by the
        warehouse, free of open marks (under the block policy), and each of its partitions
        holding at least `need` rows (the ledger's count: the markers say it is theirs)."""
        name, missing = parent.name, self.missing
        if need == 0:
            self.empty_ok.add(name)
        # a key-list partition has no time window: it reads all a time-grained model published,
        # as does a partition that reads the parent whole
        reads_all = (bool(spec.keys) and not parent.keys) or name in spec.whole_reads
        if reads_all:
            spans = state.published_intervals(name, *EVERYTHING)
            if not spans:
                for partition in partitions:
                    missing.setdefault(partition.start, f"upstream not ready: {name} is empty")
                return
            window = (spans[0][0], spans[-1][1])
        else:
            window = _clip(parent, batch.start, batch.end)
        rows = state.partitions(name, floor(parent.grain, window[0]), window[1])
        published = [
            (p.partition_start, p.partition_end, p.attempt_id) for p in rows if p.attempt_id
        ]
        held = [p for p in rows if p.attempt_id]
        have = IntervalSet.of([(s, e) for s, e, _ in published])
        gone = diverged(engine, parent, published)
        self.diverged += gone.values()
        tainted = (
            state.open_taints(name, window[0], window[1])
            if taint_policy is TaintPolicy.BLOCK
            else []
        )
        for partition in partitions:
            mine = window if reads_all else _clip(parent, partition.start, partition.end)
            gaps = IntervalSet.of([mine]).minus(have)
            if gaps:
                shown = ", ".join(r.label(parent.keys) for r in gaps.ranges(parent.grain))
                missing.setdefault(partition.start, f"upstream not ready: {name} {shown}")
                continue
            lost = [d for d in gone.values() if d.start < mine[1] and d.end > mine[0]]
            if lost:
                missing.setdefault(partition.start, refusal(parent, lost))
                self.refused.add(partition.start)
                continue
            bad = [t for t in tainted if t.mark.start < mine[1] and t.mark.end > mine[0]]
            if bad:
                missing.setdefault(partition.start, _tainted_input(parent, bad))
                continue
            within = [p for p in held if p.partition_start < mine[1] and p.partition_end > mine[0]]
            thin = [p for p in within if (p.rows or 0) < need]
            if thin:
                missing.setdefault(partition.start, _too_few_rows(parent, thin, need))
                continue
            self.rows[partition.start][name] = sum(p.rows or 0 for p in within)
            read = tuple(a for s, e, a in published if s < mine[1] and e > mine[0] and a)
            self.inputs[partition.start].append(Input(name, "model", mine[0], mine[1], None, read))


@dataclass(frozen=True)
class _SourceRead:
    checksum: Checksum
    values: dict[str, str | None]  # reconciliation rule → its source side


def _key_rows(
    engine: Engine,
    spec: ModelSpec,
    source: Source,
    column: str | None,
    partition: PartitionKey,
    rules: Sequence[Reconciliation],
) -> _SourceRead:
    """A key-list partition has no time window: it reads the source's rows holding its key in
    `column` (the model's declared column of the source's keys; the reconciliations need one),
    or else (None) the whole source."""
    bounds = bound_values(partition, partition.label(spec.keys))
    if column is None:
        return _SourceRead(engine.source_fingerprint(source.table, source.time_column, bounds), {})
    found, values = engine.key_fingerprint(
        source.table, column, bounds, [r.source_expression for r in rules]
    )
    return _SourceRead(found, {r.name: v for r, v in zip(rules, values, strict=True)})


def _cursor_inputs(
    engine: Engine,
    spec: ModelSpec,
    sources: Mapping[str, Source],
    partitions: Sequence[PartitionKey],
) -> ReadPlan:
    """A cursor partition reads the rows of its interval (start, end] of the cursor source, and
    the other sources it joins whole. Fewer rows of the cursor source than its `min_rows` skip
    the partition (the cursor then stays where it is). The reconciliations' source side is the
    cursor source's rows of the interval."""
    cursor = spec.cursor
    if cursor is None:
        raise TypeError(f"{spec.name} is not a cursor model")
    inputs: dict[int, list[Input]] = {p.start: [] for p in partitions}
    missing: dict[int, str] = {}
    baselines: dict[int, dict[str, int | None]] = {}
    counting = _relative_checks(spec, "source")
    source_values: dict[int, dict[str, str | None]] = {}
    input_rows: dict[int, dict[str, int]] = {p.start: {} for p in partitions}
    source_rows = 0
    for partition in partitions:
        for source in (sources[name] for name in spec.sources):
            if source.name == cursor.source:
                found, values = engine.cursor_fingerprint(
                    source.table,
                    cursor.column,
                    cursor_bounds(cursor.kind, partition.start, partition.end),
                    [r.source_expression for r in spec.reconciliations],
                )
                source_values[partition.start] = {
                    r.name: v for r, v in zip(spec.reconciliations, values, strict=True)
                }
                if found.rows < source.min_rows:
                    missing.setdefault(
                        partition.start,
                        f"source {source.name} has {found.rows} row(s) in the cursor interval "
                        f"(at least {source.min_rows} expected)",
                    )
            else:
                found = engine.source_fingerprint(source.table, source.time_column, {})
            source_rows += found.rows
            input_rows[partition.start][source.name] = found.rows
            _set_source_rows(baselines, counting, source.name, partition.start, found.rows)
            inputs[partition.start].append(
                Input(source.name, "source", partition.start, partition.end, str(found))
            )
    return ReadPlan(
        inputs,
        missing,
        source_rows,
        source_values,
        baselines,
        input_rows=input_rows,
        empty_ok=frozenset(s for s in spec.sources if sources[s].min_rows == 0),
    )


def _tainted_input(parent: ModelSpec, bad: Sequence[TaintedPartition]) -> str:
    first = bad[0]
    label = PartitionKey(parent.grain, first.mark.start, first.mark.end).label(parent.keys)
    more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
    if first.kind is MarkKind.TAINT:
        return (
            f"upstream tainted: {parent.name} {label}{more} ({first.reason}); "
            f"`tidegate recover {first.origin}` recomputes it"
        )
    if first.kind in WAREHOUSE_KINDS:
        # the warehouse was found without them: republishing them whole clears the marks
        span = PartitionRange(
            parent.grain, first.mark.start, max(t.mark.end for t in bad), parent.chunk_size
        )
        return (
            f"upstream {first.kind.label}: {parent.name} {label}{more} ({first.reason}); "
            f"`tidegate backfill {parent.name} --partitions {span.label(parent.keys)}` "
            "republishes it"
        )
    # a stale partition is recomputed where it is, with what was built from it
    return (
        f"upstream {first.kind.label}: {parent.name} {label}{more} ({first.reason}); "
        f"`tidegate recover {parent.name} --partitions {label}` recomputes it"
    )


def _too_few_rows(parent: ModelSpec, thin: Sequence[PublishedPartition], need: int) -> str:
    first = thin[0]
    label = PartitionKey(parent.grain, first.partition_start, first.partition_end)
    more = f" and {len(thin) - 1} more" if len(thin) > 1 else ""
    return (
        f"upstream {parent.name} {label.label(parent.keys)} holds {first.rows or 0} row(s) "
        f"(at least {need} expected, its min_rows){more}"
    )


def previous_start(spec: ModelSpec, start: int) -> int:
    """Start of the time partition before the one starting at `start`."""
    return floor(spec.grain, start - 1)


def _relative_checks(spec: ModelSpec, relative_to: str) -> list[CheckSpec]:
    return [
        c
        for c in spec.checks
        if c.kind == "row_count" and c.params.get("relative_to") == relative_to
    ]


def _published_previous(
    state: StateStore, spec: ModelSpec, batch: PartitionRange, partitions: Sequence[PartitionKey]
) -> dict[int, dict[str, int | None]]:
    """Per partition: each previous-relative check's baseline, the rows the ledger holds for
    the partition before it (one ledger read for the whole batch)."""
    checks = _relative_checks(spec, "previous")
    if not checks:
        return {}
    rows = state.partitions(spec.name, previous_start(spec, batch.start), batch.end)
    published = {p.partition_start: p.rows for p in rows if p.attempt_id}
    return {
        p.start: {c.name: published.get(previous_start(spec, p.start)) for c in checks}
        for p in partitions
    }


def _set_source_rows(
    baselines: dict[int, dict[str, int | None]],
    checks: Sequence[CheckSpec],
    source: str,
    start: int,
    rows: int,
) -> None:
    """Record a source's rows in a partition's window for the checks relative to it."""
    for check in checks:
        if check.params["source"] == source:
            baselines.setdefault(start, {})[check.name] = rows


def _clip(parent: ModelSpec, start: int, end: int) -> tuple[int, int]:
    """The window of `parent` that [start, end) reads, from the parent's first partition.

    Key-list partitions have no time window: a model reading one reads all of its keys.
    """
    if parent.keys:
        return 0, len(parent.keys)
    first = parent.first_partition()
    begin = max(start, first.start) if first else start
    return begin, max(begin, end)
