"""`tidegate verify`: compare the ledger with the warehouse, and record what diverged.

Reads the warehouse only (opened read-only: on DuckDB a writer holding the file makes it busy,
exit 4, or wait with `--wait`). `--repair` writes marks into the ledger, never the warehouse;
`backfill --stale-only` then republishes the marked partitions, which clears the marks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tidegate.domain.clock import stamp
from tidegate.domain.errors import UsageError
from tidegate.domain.model import ModelSpec
from tidegate.domain.partitions import Grain, PartitionRange
from tidegate.domain.verify import Divergence, Finding, Recorded, sample
from tidegate.engines.base import EVERY, CommitMarker, Engine, window_bounds
from tidegate.engines.factory import open_engine
from tidegate.execution.divergence import Marked, compare_model, record
from tidegate.ops.context import Context

# a recorded attempt in one of these states has not finished: its marker may be newer than the
# ledger (a writer between its warehouse commit and the ledger's), which the writer settles
LIVE = frozenset({"pending", "running", "staged", "audited"})


@dataclass(frozen=True)
class Checksums:
    """How a model's rows were compared: `how` is "off" (no --checksums), "all", "sample" or
    "not comparable" (with the reason in `note`)."""

    how: str
    compared: int = 0
    note: str | None = None


@dataclass(frozen=True)
class ModelReport:
    model: str
    spec: ModelSpec
    published: int
    markers: int
    checksums: Checksums
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class Verified:
    models: tuple[ModelReport, ...]
    repaired: tuple[Marked, ...]
    # the verified models' partitions the ledger marks not right (taint, stale, diverged,
    # missing), after any repair: a clean warehouse may still hold partitions known to be wrong
    marked: dict[str, dict[str, int]]

    @property
    def findings(self) -> list[Finding]:
        return [f for m in self.models for f in m.findings]


def verify(
    ctx: Context,
    model: str | None,
    partitions: str | None,
    checksums: bool,
    sample_size: int | None,
    repair: bool,
) -> Verified:
    """Every published partition of the models (or of `model` in `partitions`) against the
    warehouse; with `repair`, the findings marked in the ledger."""
    if sample_size is not None and sample_size < 1:
        raise UsageError(f"--sample must be at least 1 partition, not {sample_size}")
    if sample_size is not None and not checksums:
        raise UsageError(
            "--sample chooses the partitions whose checksums are compared: add --checksums"
        )
    if partitions is not None and model is None:
        raise UsageError("--partitions is in one model's grain: name the MODEL")
    names = [model] if model is not None else list(ctx.project.order)
    specs = {name: _spec(ctx, name) for name in names}
    chosen = specs[model].parse_range(partitions) if model and partitions else None
    # the ledger is open by now (the specs are the active versions'): a lost one was refused
    # before the warehouse is opened
    engine = open_engine(ctx.project, ctx.wait, read_only=True)
    try:
        reports = tuple(
            _verify_model(ctx, engine, specs[n], chosen, checksums, sample_size) for n in names
        )
    finally:
        engine.close()
    findings = [f for report in reports for f in report.findings]
    repaired = tuple(_repair(ctx, specs, findings)) if repair else ()
    counts = ctx.state.tainted_counts()
    marked = {
        name: {kind.value: count for kind, count in sorted(counts[name].items())}
        for name in names
        if name in counts
    }
    return Verified(reports, repaired, marked)


def _spec(ctx: Context, name: str) -> ModelSpec:
    spec = ctx.project.model(name)  # an unknown model is refused here
    active = ctx.state.active_version(name)
    return active.spec if active is not None else spec


def _verify_model(
    ctx: Context,
    engine: Engine,
    spec: ModelSpec,
    chosen: PartitionRange | None,
    checksums: bool,
    sample_size: int | None,
) -> ModelReport:
    start, end = (chosen.start, chosen.end) if chosen is not None else EVERY
    exists = engine.table_columns(spec.published_table) is not None
    found = compare_model(ctx.state, engine, spec.name, start, end, exists)
    how = Checksums("off")
    measured: dict[int, str] | None = None
    if checksums:
        how, measured = _measure(
            ctx, engine, spec, found.recorded, found.writers, sample_size, exists
        )
    findings = found.findings(spec.name, measured)
    findings += _unrecorded(ctx, found.markers, {r.attempt_id for r in found.recorded})
    return ModelReport(
        spec.name, spec, len(found.recorded), len(found.markers), how, tuple(findings)
    )


def _measure(
    ctx: Context,
    engine: Engine,
    spec: ModelSpec,
    recorded: Sequence[Recorded],
    writers: Mapping[int, str],
    sample_size: int | None,
    exists: bool,
) -> tuple[Checksums, dict[int, str] | None]:
    """The checksum of each sampled partition's rows now, computed as its publish computed
    it: over the columns of the version that wrote it, grouped by partition, one pass over the
    table per column list (one, unless versions added columns)."""
    reason = _incomparable(spec)
    if reason is not None:
        return Checksums("not comparable", 0, reason), None
    chosen = sample(recorded, sample_size, spec.name)
    how = "all" if len(chosen) == len(recorded) else "sample"
    if not exists or not chosen:
        return Checksums(how, 0), {}
    by_columns: dict[tuple[str, ...], list[Recorded]] = {}
    versions = {v: ctx.state.get_version(v) for v in {writers[r.start] for r in chosen}}
    for part in chosen:
        writer = versions[writers[part.start]]
        columns = tuple(c.name for c in (writer.spec if writer else spec).columns)
        by_columns.setdefault(columns, []).append(part)
    measured: dict[int, str] = {}
    for columns, parts in by_columns.items():
        bounds = window_bounds(parts[0].start, parts[-1].end)
        profiles = engine.profile(
            spec.name, False, spec.partition_column, spec.grain.value, bounds, list(columns)
        )
        for part in parts:
            found = profiles.get(part.start)
            measured[part.start] = str(found.checksum) if found else EMPTY_CHECKSUM
    return Checksums(how, len(chosen)), measured


EMPTY_CHECKSUM = "0:0000000000000000"


def _incomparable(spec: ModelSpec) -> str | None:
    """Why a model's published rows cannot be checksummed per partition like its publish did."""
    if spec.update is not None:
        return "an update model's table is written by the application too"
    if spec.cursor is not None:
        return "a cursor model's partitions are intervals of its cursor"
    if not spec.grain.is_time and spec.grain is not Grain.TABLE:
        return f"{spec.grain.value} partitions are not compared yet"
    return None


def _unrecorded(
    ctx: Context, markers: Sequence[CommitMarker], published: set[str]
) -> list[Finding]:
    """Markers whose attempt the ledger does not record as published: not the partition's
    published one, and not an earlier one it replaced. An attempt still live is a writer's
    between its warehouse commit and the ledger's: it settles it, nothing diverged."""
    found = []
    for marker in markers:
        if marker.attempt_id in published:
            continue
        attempt = ctx.state.get_attempt(marker.attempt_id)
        if attempt is not None and (
            attempt.state.value == "published" or attempt.state.value in LIVE
        ):
            continue
        found.append(
            Finding(
                Divergence.UNRECORDED_MARKER,
                marker.model,
                marker.partition_start,
                marker.partition_end,
                None,
                None,
                marker.attempt_id,
            )
        )
    return found


def _repair(ctx: Context, specs: dict[str, ModelSpec], findings: Sequence[Finding]) -> list[Marked]:
    """Mark each finding's partition `missing` or `diverged`, once. Deletes nothing."""
    return record(
        ctx.state,
        findings,
        {name: spec.grain.value for name, spec in specs.items()},
        lambda found: "verify found " + ", ".join(sorted({f.kind.value for f in found})),
        ctx.actor,
        stamp(ctx.clock),
    )
