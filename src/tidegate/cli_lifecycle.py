"""`tidegate deploy | rollback | pause | unpause`: which version of a model runs, and whether."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from tidegate.cli import Argument, common, emit, fail
from tidegate.terminal import echo

if TYPE_CHECKING:
    from tidegate.ops.deploy import Deployed


def _deployed_document(done: Deployed) -> dict[str, Any]:
    v = done.version
    return {
        "schema": "tidegate.deploy/v1",
        "model": done.model,
        "version_id": v.version_id,
        "seq": v.seq,
        "previous_version": done.previous,
        "changed": done.changed,
        "forced": done.forced,
        "gate": done.gate,
        "next_partition": done.next_partition,
        "next_through": done.upcoming.through if done.upcoming else None,
        "unpublished": list(done.upcoming.unpublished) if done.upcoming else [],
        "cursor": done.cursor,
        "stream": done.stream,
    }


def _deployed_message(done: Deployed, verb: str) -> str:
    from tidegate.ops.schedule import tick_text

    v = done.version
    if not done.changed:
        return f"{done.model}: v{v.seq} ({v.version_id}) was already active"
    gap = None
    if done.stream:
        upcoming = done.stream
    elif done.upcoming:
        window, gap = tick_text(done.model, done.upcoming)
        upcoming = f"the next run writes {window} with it"
    elif done.cursor:
        upcoming = f"the next run uses it, {done.cursor}"
    else:
        upcoming = "the next run uses it"
    override = " (gate overridden)" if done.forced else ""
    line = f"{done.model}: v{v.seq} ({v.version_id}) {verb}{override}; {done.gate}; {upcoming}"
    return line if gap is None else f"{line}\n  {gap}"


@click.command()
@click.argument("model", cls=Argument, help="The model to deploy a version of.")
@click.option(
    "--version", "version_ref", default=None, help="vN or a version id (default: newest)."
)
@click.option("--force", is_flag=True, help="Deploy although the gate refuses; needs --reason.")
@click.option("--reason", default=None, help="Why: kept by history.")
@common
def deploy(
    ctx: Any, as_json: bool, model: str, version_ref: str | None, force: bool, reason: str | None
) -> None:
    """Make a version of MODEL the active one: its newest validation gate must have passed."""
    from tidegate.ops.deploy import deploy as deploy_op

    done = deploy_op(ctx, model, version_ref, force, reason)
    emit(as_json, _deployed_document(done), lambda: echo(_deployed_message(done, "is active")))


@click.command()
@click.argument("model", cls=Argument, help="The model to roll back.")
@click.option("--to", "version_ref", default=None, help="vN or a version id (default: previous).")
@click.option("--reason", default=None, help="Why: kept by history.")
@click.option(
    "--approve",
    is_flag=True,
    help="A stream: accept withdrawing the output committed since the undone deploy.",
)
@common
def rollback(
    ctx: Any,
    as_json: bool,
    model: str,
    version_ref: str | None,
    reason: str | None,
    approve: bool,
) -> None:
    """Make the previous (or an earlier deployed) version of MODEL active again."""
    from tidegate.ops.deploy import rollback as rollback_op

    done = rollback_op(ctx, model, version_ref, reason, approve)
    after = (
        ""
        if done.stream
        else f"; partitions written by {done.previous} are stale (backfill --stale-only)"
    )
    emit(
        as_json,
        {**_deployed_document(done), "schema": "tidegate.rollback/v1"},
        lambda: echo(_deployed_message(done, "is active again") + after),
    )


def _pause_command(paused: bool) -> click.Command:
    verb = "pause" if paused else "unpause"

    @click.command(name=verb)
    @click.argument("model", cls=Argument, help=f"The model to {verb}.")
    @click.option("--reason", default=None, help="Why: kept by history.")
    @common
    def command(ctx: Any, as_json: bool, model: str, reason: str | None) -> None:
        from tidegate.ops import deploy as ops

        changed = (ops.pause if paused else ops.unpause)(ctx, model, reason)
        stream = ops.stream_pause_note(ctx, model, paused) if changed else None
        if paused:
            message = f"{model}: paused" if changed else f"{model}: already paused"
        else:
            message = f"{model}: unpaused" if changed else f"{model}: was not paused"
        emit(
            as_json,
            {
                "schema": "tidegate.pause/v1",
                "model": model,
                "paused": paused,
                "changed": changed,
                "stream": stream,
            },
            lambda: echo(message if stream is None else f"{message}; {stream}"),
        )

    command.help = (
        "Stop runs and new backfills of MODEL until it is unpaused."
        if paused
        else "Let runs and backfills of MODEL start again."
    )
    return command


pause = _pause_command(True)
unpause = _pause_command(False)


@click.command()
@click.argument("model", cls=Argument, help="The model to validate a version of.")
@click.option(
    "--version", "version_ref", default=None, help="vN or a version id (default: newest)."
)
@click.option("--sample", "sample_size", type=int, default=None, help="Sample partitions (5).")
@click.option("--partitions", default=None, help="Validate these partitions instead: START..END.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random sample.")
@click.option("--wait", is_flag=True, help="Wait for another writer instead of exiting 4.")
@common
def validate(
    ctx: Any,
    as_json: bool,
    model: str,
    version_ref: str | None,
    sample_size: int | None,
    partitions: str | None,
    seed: int,
    wait: bool,
) -> None:
    """Run a version of MODEL on sample partitions into its shadow table and record a gate."""
    from tidegate import render
    from tidegate.ops.validate import validate as validate_op

    gate = validate_op(ctx, model, version_ref, sample_size, partitions, seed)
    document = render.gate_doc(gate)
    emit(as_json, document, lambda: render.gate(document))
    if not gate.passed:
        fail(f"{model} v{gate.report['seq']}: gate {gate.gate_id} failed", 1, as_json=False)
