"""`tidegate taint`, `tidegate recover …` and `tidegate ack`: contamination and its repair."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tidegate.cli import Argument, common, emit, streams_events
from tidegate.cli_backfill import (
    BackfillGroup,
    MainForm,
    request_stop,
    resumed_already,
    run_batches,
)
from tidegate.terminal import echo

if TYPE_CHECKING:
    from tidegate.domain.recover import RecoverPlan
    from tidegate.event_stream import EventStream
    from tidegate.ops.context import Context


@click.command()
@click.argument("model", cls=Argument, help="The model whose published partitions are bad.")
@click.option("--partitions", required=True, help="START..END of MODEL that is contaminated.")
@click.option("--reason", required=True, help="Why: shown everywhere the taint is.")
@common
def taint(ctx: Context, as_json: bool, model: str, partitions: str, reason: str) -> None:
    """Mark MODEL's published partitions in --partitions contaminated, and every downstream
    partition that read them; tell the consumers of each."""
    from tidegate.ops import taint as op

    done = op.taint(ctx, model, partitions, reason)
    reached = {m: _labels(ctx, m, w) for m, w in done.by_model().items()}
    depth = {m.model: m.depth for m in reversed(done.marks)}
    tainted: list[dict[str, Any]] = [
        {
            "model": name,
            "depth": depth[name],
            "partitions": ranges,
            "count": sum(1 for m in done.marks if m.model == name),
        }
        for name, ranges in reached.items()
    ]
    document = {
        "schema": "tidegate.taint/v1",
        "taint_id": done.taint.taint_id,
        "model": model,
        "partitions": partitions,
        "reason": reason,
        "tainted": tainted,
        "consumers_notified": list(done.consumers),
        "notes": list(done.notes),
    }

    def human() -> None:
        echo(f"{done.taint.taint_id}: {model} {partitions} tainted ({reason})")
        for entry in tainted:
            echo(
                f"  {entry['model']:<24} {entry['count']:>5} partition(s)  depth "
                f"{entry['depth']}  {', '.join(entry['partitions'])}"
            )
        told = ", ".join(done.consumers) or "no registered consumer"
        echo(f"  consumers told: {told}")
        for note in done.notes:
            echo(f"  {note}")
        echo(f"fix the cause, then `tidegate recover {model}`")

    emit(as_json, document, human)


@click.command()
@click.argument("consumer", cls=Argument, help="A consumer declared in [[consumers]].")
@click.argument("model", cls=Argument, help="The model it read.")
@click.option("--partitions", required=True, help="START..END the consumer has read.")
@common
def ack(ctx: Context, as_json: bool, consumer: str, model: str, partitions: str) -> None:
    """Record that CONSUMER has read --partitions of MODEL."""
    from tidegate.ops import taint as op

    chosen = op.ack(ctx, consumer, model, partitions)
    label = chosen.label(ctx.project.model(model).keys)
    emit(
        as_json,
        {"schema": "tidegate.ack/v1", "consumer": consumer, "model": model, "partitions": label},
        lambda: echo(f"{consumer} has read {model} {label}"),
    )


@click.group(cls=BackfillGroup)
def recover() -> None:
    """Recompute tainted partitions, upstream first, and clear their taint."""


@recover.command(
    "start", cls=MainForm, hidden=True, usage="MODEL [--partitions START..END] [OPTIONS]"
)
@click.argument(
    "model",
    required=False,
    cls=Argument,
    help="The tainted model to recover (with --file, the plan's; if given, it must match).",
)
@click.option("--partitions", default=None, help="Only the tainted partitions in START..END.")
@click.option("--batch-size", type=int, default=None, help="Partitions per batch (default 7).")
@click.option("--max-concurrency", type=int, default=None, help="Batches in flight (default 1).")
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option(
    "--file",
    "plan_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Take the model, range and batching from a reviewed plan file.",
)
@click.option("--wait", is_flag=True, help="Wait for another writer instead of exiting 4.")
@common
@streams_events
def start(
    ctx: Context,
    as_json: bool,
    events: EventStream | None,
    model: str | None,
    partitions: str | None,
    batch_size: int | None,
    max_concurrency: int | None,
    dry_run: bool,
    plan_file: Path | None,
    wait: bool,
) -> None:
    """Recover MODEL: recompute its tainted partitions and those downstream that read them."""
    from tidegate.domain.errors import UsageError
    from tidegate.ops import recover as op
    from tidegate.ops.backfill import read_plan_file

    flags = {
        "partitions": partitions,
        "batch_size": batch_size,
        "max_concurrency": max_concurrency,
    }
    if plan_file is not None:
        given = sorted(k for k, v in flags.items() if v is not None)
        if given:
            raise UsageError(f"--file takes every parameter from the plan; drop --{given[0]}")
        values, text = read_plan_file(plan_file)
        request = op.from_file(values, str(plan_file), text)
        if model is not None and request.model != model:
            raise UsageError(f"{plan_file} is a plan for {request.model!r}, not {model!r}")
    elif model is None:
        raise UsageError("recover needs a MODEL (or --file PLAN.toml)")
    else:
        request = op.Request(
            model,
            partitions,
            batch_size or op.DEFAULT_BATCH_SIZE,
            max_concurrency or 1,
        )
    if dry_run:
        recovery = op.make_recovery(ctx, request)
        op.refuse_unready_now(ctx, recovery.plan)
        notes = op.left_notes(ctx, recovery)
        document = {
            "schema": "tidegate.recover-plan/v1",
            **_plan_document(ctx, recovery.plan),
            "notes": notes,
        }
        emit(as_json, document, lambda: _show_plan(ctx, recovery.plan, notes))
        return
    run_batches(
        as_json,
        events,
        lambda flag, progress: op.start(ctx, request, flag, progress.outcome, progress.start),
        "recover",
    )


@recover.command("resume")
@click.argument("run_id", cls=Argument, help="The recovery's run id.")
@click.option("--wait", is_flag=True, help="Wait for another writer instead of exiting 4.")
@common
@streams_events
def resume(
    ctx: Context, as_json: bool, events: EventStream | None, run_id: str, wait: bool
) -> None:
    """Continue a stopped or failed recovery with its recorded plan."""
    from tidegate.ops import recover as op

    if resumed_already(ctx, as_json, events, run_id, op.KIND):
        return
    run_batches(
        as_json,
        events,
        lambda flag, progress: op.resume(ctx, run_id, flag, progress.outcome, progress.start),
        "recover",
    )


@recover.command("stop")
@click.argument("run_id", cls=Argument, help="The recovery's run id.")
@common
def stop(ctx: Context, as_json: bool, run_id: str) -> None:
    """Ask a running recovery to stop after its in-flight batches."""
    request_stop(ctx, as_json, run_id, "recover")


def _plan_document(ctx: Context, plan: RecoverPlan) -> dict[str, Any]:
    from tidegate.ops.announce import notified

    return {
        "model": plan.model,
        "partitions": plan.partitions,
        "taint_ids": list(plan.taint_ids),
        "steps": [
            {
                "model": step.model,
                "version_id": step.version_id,
                "partitions": step.partitions,
                "ranges": _labels(ctx, step.model, list(step.selection)),
            }
            for step in plan.steps
        ],
        "consumers_to_notify": notified(ctx, list(plan.models)),
    }


def _show_plan(ctx: Context, plan: RecoverPlan, notes: list[str]) -> None:
    echo(f"dry run: recover {plan.partitions} tainted partition(s), in this order:")
    for number, step in enumerate(plan.steps, 1):
        ranges = ", ".join(_labels(ctx, step.model, list(step.selection)))
        echo(f"  {number}. {step.model:<24} {step.partitions:>5} partition(s)  {ranges}")
    for note in notes:
        echo(f"  {note}")
    echo("nothing was written")


def _labels(ctx: Context, model: str, windows: list[tuple[int, int]]) -> list[str]:
    from tidegate.ops.announce import labels

    return list(labels(ctx, model, windows))
