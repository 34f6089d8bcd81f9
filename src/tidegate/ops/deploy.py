"""Deploy: switch a model's active version, recorded with who, when and why."""

from __future__ import annotations

from dataclasses import dataclass

from tidegate.domain.clock import stamp
from tidegate.domain.errors import RefusedError, UsageError
from tidegate.domain.model import Version
from tidegate.ops.context import Context
from tidegate.ops.gates import deploy_gate
from tidegate.state.base import Event


@dataclass(frozen=True)
class Deployed:
    model: str
    version: Version
    previous: str | None
    changed: bool
    forced: bool


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
        return Deployed(model, version, active, changed=False, forced=False)
    decision = deploy_gate(version)
    if not decision.allowed and not force:
        raise RefusedError(decision.reason)
    ctx.state.activate(
        model,
        version.version_id,
        stamp(ctx.clock),
        Event(
            kind="deploy",
            actor=ctx.actor,
            at=stamp(ctx.clock),
            model=model,
            version_id=version.version_id,
            reason=reason,
            detail={
                "previous": active,
                "forced": force and not decision.allowed,
                "gate": decision.reason,
            },
        ),
    )
    return Deployed(model, version, active, changed=True, forced=force and not decision.allowed)
