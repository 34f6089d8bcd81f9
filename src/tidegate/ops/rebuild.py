"""`tidegate verify --rebuild-ledger`: an empty ledger filled again from the warehouse's commit
markers, each marker becoming a published attempt of a run, as far as the markers tell.

A marker names its attempt, run, partition, version id, checksum (rows and digest) and when it
was published; nothing else survives a lost ledger (plans, checks, lineage, requesters, gates,
deploy history). Versions come from `build` over the code as it is now: a version id is a
fingerprint of the model's definition, so a marker whose version the current code still
produces is matched to it exactly. A version the code no longer produces gets a placeholder
that says its definition was lost (tidegate refuses to run it; `backfill --stale-only`
recomputes its partitions with the active version). Every rebuilt run, and each model's
history, says it was rebuilt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tidegate.domain.attempt import AttemptState, RunStatus
from tidegate.domain.checksum import Checksum
from tidegate.domain.clock import stamp
from tidegate.domain.errors import UsageError
from tidegate.domain.fingerprint import short
from tidegate.domain.model import LOST_DEFINITION, ChangeKind, Version
from tidegate.domain.run import Attempt, Run
from tidegate.engines.base import CommitMarker
from tidegate.engines.factory import open_markers
from tidegate.ops.build import build, snapshots
from tidegate.ops.context import Context
from tidegate.state.base import Event

KIND = "rebuilt"
REBUILT_EVENT = "ledger-rebuilt"


@dataclass(frozen=True)
class Rebuilt:
    markers: int
    runs: int
    matched: tuple[str, ...]  # version ids the current code produces
    lost: tuple[str, ...]  # version ids given a placeholder
    activated: dict[str, str]  # model → version id made active


def rebuild_ledger(ctx: Context) -> Rebuilt:
    """Fill an empty ledger from the markers; refuses (UsageError) a ledger that records runs,
    and a warehouse without markers of the project's models."""
    ctx.rebuilding = True
    if ctx.state.runs(limit=1):
        raise UsageError(
            "the ledger records runs: --rebuild-ledger fills only an empty ledger (restore a "
            "lost one from a backup, or move it aside first)"
        )
    markers = _markers(ctx)
    if not markers:
        raise UsageError(
            f"the warehouse holds no commit markers of project "
            f"{ctx.project.settings.project.name}: nothing to rebuild"
        )
    # placeholders first, so that the versions the code produces now are each model's newest
    # (what a deploy takes by default)
    current = {short(full) for _, full, _, _ in snapshots(ctx.project)}
    lost = _placeholders(ctx, markers, current)
    built = {b.version.version_id: b.version for b in build(ctx)}
    at = stamp(ctx.clock)
    runs = _runs(ctx, markers, at)
    for marker in markers:  # oldest first: each partition ends with its newest marker
        _publish(ctx, marker)
    activated = _activate(ctx, markers, built, at)
    for model in sorted({m.model for m in markers}):
        mine = [m for m in markers if m.model == model]
        ctx.state.record_event(
            Event(
                kind=REBUILT_EVENT,
                actor=ctx.actor,
                at=at,
                model=model,
                reason=(
                    f"ledger rebuilt from {len(mine)} commit markers of the warehouse; plans, "
                    "checks, lineage and deploy history before it are lost"
                ),
                detail={
                    "markers": len(mine),
                    "runs": sorted({m.run_id for m in mine}),
                    "versions_lost": sorted({m.version_id for m in mine} & set(lost)),
                },
            )
        )
    matched = sorted({m.version_id for m in markers} & set(built))
    return Rebuilt(len(markers), runs, tuple(matched), tuple(sorted(lost)), activated)


def _markers(ctx: Context) -> list[CommitMarker]:
    reader = open_markers(ctx.project)
    if reader is None:
        return []
    try:
        found = [m for model in ctx.project.order for m in reader.markers_of(model)]
    finally:
        reader.close()
    # attempt ids follow the wall clock; published_at follows --as-of
    return sorted(found, key=lambda m: m.attempt_id)


def _placeholders(ctx: Context, markers: Sequence[CommitMarker], current: set[str]) -> list[str]:
    """A placeholder version for each version id no current definition produces."""
    lost: list[str] = []
    for marker in markers:
        if marker.version_id in current or marker.version_id in lost:
            continue
        spec = ctx.project.model(marker.model)
        ctx.state.save_version(
            Version(
                version_id=marker.version_id,
                model=marker.model,
                seq=ctx.state.next_seq(marker.model),
                fingerprint=f"{LOST_DEFINITION}{marker.version_id}",
                sql=f"-- {LOST_DEFINITION}: rebuilt from commit markers; not runnable",
                # the columns and partitioning as the code declares them now, to show its
                # partitions; never run (readiness refuses a lost definition)
                spec=spec,
                upstream_fingerprints={},
                git_commit=None,
                git_dirty=False,
                tool_versions={},
                created_at=marker.published_at,
                change=ChangeKind.NEW,
            )
        )
        lost.append(marker.version_id)
    return lost


def _runs(ctx: Context, markers: Sequence[CommitMarker], at: str) -> int:
    by_run: dict[str, list[CommitMarker]] = {}
    for marker in markers:
        by_run.setdefault(marker.run_id, []).append(marker)
    for run_id, mine in by_run.items():
        models = tuple(sorted({m.model for m in mine}))
        ctx.state.create_run(
            Run(
                run_id=run_id,
                kind=KIND,
                models=models,
                partitions=_span(ctx, mine),
                requester="unknown (rebuilt)",
                status=RunStatus.SUCCEEDED,
                started_at=mine[0].published_at,
                reason=(
                    f"rebuilt by {ctx.actor} at {at} from {len(mine)} commit markers (`tidegate "
                    "verify --rebuild-ledger`): its kind, plan and checks were lost with the ledger"
                ),
                ended_at=mine[-1].published_at,
            )
        )
    return len(by_run)


def _span(ctx: Context, markers: Sequence[CommitMarker]) -> str:
    spec = ctx.project.model(markers[0].model)
    start = min(m.partition_start for m in markers)
    end = max(m.partition_end for m in markers)
    return spec.span(start, end).label(spec.keys)


def _publish(ctx: Context, marker: CommitMarker) -> None:
    """The marker's attempt, published as the warehouse says it was: intent, content, publish."""
    content = Checksum.parse(marker.checksum)
    attempt = Attempt(
        attempt_id=marker.attempt_id,
        run_id=marker.run_id,
        model=marker.model,
        grain=marker.grain,
        partition_start=marker.partition_start,
        partition_end=marker.partition_end,
        version_id=marker.version_id,
        state=AttemptState.AUDITED,
        started_at=marker.published_at,
    )
    ctx.state.create_attempts([attempt])
    ctx.state.record_published_content({attempt.attempt_id: (content.rows, marker.checksum)})
    ctx.state.publish(attempt.attempt_id, marker.published_at)


def _activate(
    ctx: Context, markers: Sequence[CommitMarker], built: dict[str, Version], at: str
) -> dict[str, str]:
    """Each model's active version: the one of its newest marker, when the current code
    produces it (a lost definition cannot run); otherwise the model waits for a deploy."""
    newest = {m.model: m for m in markers}  # oldest first: the last one stays
    activated = {}
    for model, marker in newest.items():
        version = built.get(marker.version_id)
        if version is None:
            continue
        ctx.state.activate(
            model,
            version.version_id,
            at,
            Event(
                kind="deploy",
                actor=ctx.actor,
                at=at,
                model=model,
                version_id=version.version_id,
                reason="ledger rebuilt: the version of the newest commit marker is active again",
                detail={"rebuilt": True},
            ),
        )
        activated[model] = version.version_id
    return activated
