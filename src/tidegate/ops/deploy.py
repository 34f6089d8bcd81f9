"""Deploy, rollback, pause and unpause: which version of a model runs, recorded with who, when
and why."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone

from tidegate.domain.clock import stamp
from tidegate.domain.errors import RefusedError, UsageError
from tidegate.domain.gate import deploy_decision
from tidegate.domain.model import Version, broken_columns
from tidegate.ops.build import columns_read_by
from tidegate.ops.context import Context
from tidegate.ops.cursor import position
from tidegate.ops.preflight import preflight
from tidegate.ops.schedule import NextDue, next_due
from tidegate.state.base import Event


@dataclass(frozen=True)
class Deployed:
    model: str
    version: Version
    previous: str | None
    changed: bool
    forced: bool
    gate: str
    upcoming: NextDue | None  # what the next scheduler tick runs with this version
    # a cursor model's: where the next run starts with this version, and why
    cursor: str | None = None
    # a stream model's: how its supervisor carried the release out (ops/stream_release.py)
    stream: str | None = None

    @property
    def next_partition(self) -> str | None:
        return self.upcoming.partition if self.upcoming else None


def resolve(ctx: Context, model: str, ref: str | None) -> Version:
    ctx.project.model(model)
    if ref is None:
        versions = ctx.state.versions(model)
        if not versions:
            raise UsageError(f"model {model!r} has no versions; run `tidegate build` first")
        return versions[-1]
    version = ctx.state.resolve_version(model, ref)
    if version is None:
        raise UsageError(f"model {model!r} has no version {ref!r} (use vN or a version id)")
    return version


def deploy(
    ctx: Context, model: str, ref: str | None, force: bool = False, reason: str | None = None
) -> Deployed:
    if force and not reason:
        raise UsageError("--force needs --reason TEXT, which history keeps")
    version = resolve(ctx, model, ref)
    current = ctx.state.model_state(model)
    active = current.active_version if current else None
    if active == version.version_id:
        return Deployed(
            model, version, active, False, False, "already active", *_next(ctx, version)
        )
    # a cursor it cannot continue is refused whatever the gate: no --force skips or repeats rows
    cursor = _cursor(ctx, version)
    decision = deploy_decision(
        version, active, ctx.state.gates(model), _affected_readers(ctx, version)
    )
    if not decision.allowed and not force:
        raise RefusedError(decision.reason)
    problems = preflight(ctx, version)
    if problems and not force:
        raise RefusedError(
            f"{model} v{version.seq} failed its preflight, nothing changed: "
            + "; ".join(problems)
            + " (or --force --reason TEXT)"
        )
    forced = force and (not decision.allowed or bool(problems))
    known = len(ctx.state.events(model))
    _activate(
        ctx,
        "deploy",
        version,
        active,
        reason,
        {"forced": forced, "gate": decision.reason, "preflight": problems},
    )
    return Deployed(
        model,
        version,
        active,
        True,
        forced,
        decision.reason,
        _next(ctx, version)[0],
        cursor,
        _released(ctx, version, known),
    )


def _affected_readers(ctx: Context, version: Version) -> dict[str, list[str]]:
    """Downstream models reading a column `version` removes or retypes, with those columns;
    columns whose declared deprecation window (`[deprecated]` in the active version) has ended
    are no longer owed to readers."""
    active = ctx.state.active_version(version.model)
    if active is None:
        return {}
    # A window ends by the calendar, not by --as-of: a backdated or future "now" must not end
    # what readers were promised. The column may go the day after its date.
    today = datetime.now(timezone.utc).date()
    expired = {
        column for column, until in active.spec.deprecated if date.fromisoformat(until) < today
    }
    broken = broken_columns(active.spec.columns, version.spec.columns) - expired
    if not broken:
        return {}
    schema = {version.model: {c.name: c.type for c in active.spec.columns}}
    affected: dict[str, list[str]] = {}
    for name, project_spec in ctx.project.models.items():
        # what runs downstream today, and what its files would deploy next
        running = ctx.state.active_version(name)
        readers = [project_spec, *([running.spec] if running else [])]
        read: set[str] = set()
        for reader in readers:
            if version.model in reader.upstream:
                read |= columns_read_by(reader, schema).get(version.model, set())
        if read & broken:
            affected[name] = sorted(read & broken)
    return affected


def rollback(
    ctx: Context, model: str, ref: str | None, reason: str | None, approve: bool = False
) -> Deployed:
    """Make the previous (or a named, earlier deployed) version active again. Partitions the
    rolled-back version wrote become stale: `backfill --stale-only` is the way forward. A
    stream restarts from the savepoint the undone deploy took (see ops/stream_release.py);
    `approve` accepts withdrawing the output committed since."""
    ctx.project.model(model)
    current = ctx.state.model_state(model)
    active = current.active_version if current else None
    if active is None:
        raise UsageError(f"model {model!r} was never deployed: nothing to roll back")
    if ref is None:
        if current is None or current.previous_version is None:
            raise UsageError(f"model {model!r} has no previous version to roll back to")
        target = ctx.state.get_version(current.previous_version)
        assert target is not None, "the ledger keeps every version it activated"
    else:
        target = resolve(ctx, model, ref)
        ran = {e.version_id for e in ctx.state.events(model) if e.kind in ("deploy", "rollback")}
        if target.version_id not in ran:
            raise UsageError(
                f"{model} v{target.seq} was never deployed: roll back only to a version that "
                "ran before (use `tidegate deploy` for a new one)"
            )
    if target.version_id == active:
        raise UsageError(f"{model} v{target.seq} is already active")
    _cursor(ctx, target)
    detail: dict[str, object] = {}
    if target.spec.stream is not None:
        from tidegate.ops.stream_release import plan_rollback

        undone = ctx.state.get_version(active)
        assert undone is not None, "the ledger keeps every version it activated"
        plan = plan_rollback(ctx, undone, target, approve)
        detail = {
            "restore": plan.restore,
            "withdrawn_files": plan.withdrawn_files,
            "withdrawn_rows": plan.withdrawn_rows,
        }
    known = len(ctx.state.events(model))
    _activate(ctx, "rollback", target, active, reason, detail)
    return Deployed(
        model,
        target,
        active,
        True,
        False,
        "rollback",
        *_next(ctx, target),
        stream=_released(ctx, target, known),
    )


def _released(ctx: Context, version: Version, known_events: int) -> str | None:
    """How a stream's supervisor carried out making `version` active (None: not a stream)."""
    if version.spec.stream is None:
        return None
    from tidegate.ops.stream_release import await_release

    return await_release(ctx, version, known_events)


def pause(ctx: Context, model: str, reason: str | None) -> bool:
    """Stop runs and new backfills of `model`. Returns whether anything changed."""
    return _set_paused(ctx, model, True, reason)


def unpause(ctx: Context, model: str, reason: str | None) -> bool:
    return _set_paused(ctx, model, False, reason)


def stream_pause_note(ctx: Context, model: str, paused: bool) -> str | None:
    """For a stream model, how its supervisor carried out a pause or an unpause."""
    if ctx.project.model(model).stream is None:
        return None
    from tidegate.ops.stream_release import await_pause

    return await_pause(ctx, model, paused)


def _set_paused(ctx: Context, model: str, paused: bool, reason: str | None) -> bool:
    ctx.project.model(model)
    current = ctx.state.model_state(model)
    if bool(current and current.paused) == paused:
        return False
    event = Event(
        kind="pause" if paused else "unpause",
        actor=ctx.actor,
        at=stamp(ctx.clock),
        model=model,
        reason=reason,
    )
    ctx.state.set_paused(model, paused, event)
    return True


def _activate(
    ctx: Context,
    kind: str,
    version: Version,
    previous: str | None,
    reason: str | None,
    detail: dict[str, object],
) -> None:
    at = stamp(ctx.clock)
    event = Event(
        kind=kind,
        actor=ctx.actor,
        at=at,
        model=version.model,
        version_id=version.version_id,
        reason=reason,
        detail={"previous": previous, "seq": version.seq, **detail},
    )
    ctx.state.activate(version.model, version.version_id, at, event)


def _next(ctx: Context, version: Version) -> tuple[NextDue | None, str | None]:
    """What the next tick runs with `version`, or where a cursor model continues."""
    if version.spec.cursor is not None:
        return None, _cursor(ctx, version)
    return next_due(ctx, version), None


def _cursor(ctx: Context, version: Version) -> str | None:
    """Where a cursor model's next run starts with `version`; raises RefusedError when it
    cannot continue the model's cursor (see ops/cursor.position)."""
    if version.spec.cursor is None:
        return None
    return position(ctx.state, version).reason
