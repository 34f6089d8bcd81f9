"""Post-deploy correctness check: the first partition a newly deployed version publishes is
compared with what the previous version computes for the same partition (written to its shadow
table, never where readers look). The comparison is recorded on the deploy, for `status` and
`history`."""

from __future__ import annotations

from dataclasses import dataclass

from tidegate.domain.attempt import AttemptState
from tidegate.domain.clock import stamp
from tidegate.domain.errors import TidegateError, UsageError
from tidegate.domain.model import Version
from tidegate.execution.executor import Outcome
from tidegate.execution.session import WriterSession
from tidegate.ops.context import Context
from tidegate.ops.diff import diff
from tidegate.ops.validate import shadow_run
from tidegate.state.base import Event


@dataclass(frozen=True)
class Pending:
    """A deploy no run has confirmed yet, and the version it replaced."""

    version: Version
    previous: Version


def pending_deploys(ctx: Context, versions: list[Version]) -> list[Pending]:
    found = []
    for version in versions:
        state = ctx.state.model_state(version.model)
        if state is None or state.previous_version is None:
            continue
        if ctx.state.confirming_run(version.model) is not None:
            continue
        previous = ctx.state.get_version(state.previous_version)
        if previous is not None:
            found.append(Pending(version, previous))
    return found


def shadow_previous(
    session: WriterSession, run_id: str, pending: list[Pending], outcomes: list[Outcome]
) -> list[tuple[Pending, str, str | None]]:
    """For each deploy this run confirmed: its first published partition, computed again by
    the previous version into that version's shadow table (or why it could not be: a check
    after the run succeeded must never fail it)."""
    compared: list[tuple[Pending, str, str | None]] = []
    for deploy in pending:
        if session.state.confirming_run(deploy.version.model) != run_id:
            continue
        first = next(
            o
            for o in outcomes
            if o.model == deploy.version.model and o.state is AttemptState.PUBLISHED
        )
        try:
            verdict, _ = shadow_run(session, deploy.previous, first.partition, run_id)
        except TidegateError as error:
            compared.append((deploy, first.label, f"v{deploy.previous.seq} could not run: {error}"))
            continue
        failed = None if verdict.rows is not None else f"v{deploy.previous.seq}: {verdict.reason}"
        compared.append((deploy, first.label, failed))
    return compared


def record(ctx: Context, compared: list[tuple[Pending, str, str | None]]) -> list[str]:
    """Diff each confirmed deploy's first partition against the previous version; record it."""
    notes = []
    for deploy, label, problem in compared:
        version, previous = deploy.version, deploy.previous
        detail: dict[str, object] = {"partition": label, "against": f"v{previous.seq}"}
        try:
            if problem is not None:
                raise UsageError(problem)
            found = diff(ctx, version.model, previous.version_id, version.version_id, label)
        except TidegateError as error:
            detail |= {"agree": None, "note": str(error)}
            verdict = f"not compared ({error})"
        else:
            detail |= {"agree": found["agree"], "summary": found["summary"]}
            verdict = "the same" if found["agree"] else "different"
            added = found["columns"]["only_right"]
            if added:
                verdict += f" on the common columns; new: {', '.join(added)}"
        ctx.state.record_event(
            Event(
                kind="correctness",
                actor=ctx.actor,
                at=stamp(ctx.clock),
                model=version.model,
                version_id=version.version_id,
                detail=detail,
            )
        )
        notes.append(
            f"{version.model} v{version.seq} confirmed: its first partition {label} against "
            f"v{previous.seq}: {verdict}"
        )
    return notes
