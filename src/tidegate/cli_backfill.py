"""`tidegate backfill …`: start, dry-run, stop, resume and list backfills."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from tidegate.cli import INTERRUPTED_EXIT, Argument, common, emit, fail, streams_events
from tidegate.terminal import echo

if TYPE_CHECKING:
    from tidegate.event_stream import EventStream
    from tidegate.progress import BackfillProgress

STOPPED_EXIT = 5
RESULT_SCHEMA = "tidegate.backfill-result/v1"


class _MainFormContext(click.Context):
    @property
    def command_path(self) -> str:
        # the group's own path: what users type is `backfill MODEL`, never the hidden name
        # `start` the group dispatches it to (usage lines, "Try … --help")
        return self.parent.command_path if self.parent is not None else super().command_path


class MainForm(click.Command):
    """The command a group runs when its first word names none of its subcommands
    (`backfill MODEL …`): registered, hidden, as `start`; `usage` is its form after the group."""

    context_class = _MainFormContext

    def __init__(self, *args: Any, usage: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.usage = usage

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return [self.usage]


class BackfillGroup(click.Group):
    """`backfill MODEL …` starts one; `backfill resume|stop|list` are subcommands. Its help is
    the main form's (usage and options) followed by the subcommands."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["start", *args]
        return super().parse_args(ctx, args)

    @property
    def main_form(self) -> MainForm:
        command = self.commands["start"]
        assert isinstance(command, MainForm)
        return command

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(ctx.command_path, self.main_form.usage)
        formatter.write_usage(ctx.command_path, "COMMAND [ARGS]...", prefix="   or: ")

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.main_form.format_options(ctx, formatter)
        self.format_commands(ctx, formatter)


@click.group(cls=BackfillGroup)
def backfill() -> None:
    """Recompute a historical range in throttled batches: stoppable, resumable, verifiable."""


@contextmanager
def ctrl_c_stops(stop_flag: threading.Event, progress: BackfillProgress | None) -> Iterator[None]:
    """The first Ctrl-C stops after in-flight batches (shown by the progress, if any); the
    second aborts them."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop_flag.is_set():
            raise KeyboardInterrupt
        stop_flag.set()
        if progress is not None:
            progress.stopping()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@backfill.command(
    "start", cls=MainForm, hidden=True, usage="MODEL --partitions START..END [OPTIONS]"
)
@click.argument(
    "model",
    required=False,
    cls=Argument,
    help="The model to backfill (with --file, the plan's; if given, it must match).",
)
@click.option("--partitions", default=None, help="START..END in the model's grain, or all.")
@click.option("--batch-size", type=int, default=None, help="Partitions per batch (default 1).")
@click.option("--max-concurrency", type=int, default=None, help="Batches in flight (default 1).")
@click.option("--rate", default=None, help="At most N batch starts per minute: N/min.")
@click.option("--max-failures", type=int, default=None, help="Stop after F failed partitions.")
@click.option(
    "--stale-only", is_flag=True, help="Only partitions not written by the active version."
)
@click.option("--dry-run", is_flag=True, help="Print the plan and its blast radius; write nothing.")
@click.option(
    "--file",
    "plan_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Take every parameter from a reviewed plan file.",
)
@click.option(
    "--lock-timeout", default=None, help="An update model's bound on each lock wait, e.g. 2s."
)
@click.option(
    "--statement-timeout", default=None, help="An update model's bound on each statement, e.g. 30s."
)
@click.option(
    "--max-batch-latency",
    default=None,
    help="Slow down while batches take longer than this (e.g. 2s), speed up when they don't.",
)
@click.option("--wait", is_flag=True, help="Wait for another writer instead of exiting 4.")
@click.option("--force", is_flag=True, help="Backfill a paused model anyway.")
@click.option(
    "--distributed",
    is_flag=True,
    help="Queue the batches for `tidegate worker` processes and watch them.",
)
@click.option(
    "--cascade",
    is_flag=True,
    help="Then recompute what the backfill left stale downstream, upstream first.",
)
@click.option(
    "--detach",
    is_flag=True,
    help="Run in the background: print the run id once the run is recorded, and return "
    "(follow it with tidegate show run RUN).",
)
@click.option(
    "--approve",
    default=None,
    help="With --cascade: approve replacing downstream partitions consumers read.",
)
@common
@streams_events
def start(
    ctx: Any,
    as_json: bool,
    events: EventStream | None,
    model: str | None,
    partitions: str | None,
    batch_size: int | None,
    max_concurrency: int | None,
    rate: str | None,
    max_failures: int | None,
    stale_only: bool,
    dry_run: bool,
    plan_file: Path | None,
    lock_timeout: str | None,
    statement_timeout: str | None,
    max_batch_latency: str | None,
    wait: bool,
    force: bool,
    distributed: bool,
    cascade: bool,
    detach: bool,
    approve: str | None,
) -> None:
    """Backfill MODEL over --partitions."""
    from tidegate.domain.errors import UsageError
    from tidegate.ops import backfill as op

    if detach:
        if dry_run:
            raise UsageError("--dry-run writes nothing and returns at once; drop --detach")
        _detach(ctx, as_json)
        return

    flags = {
        "model": model,
        "partitions": partitions,
        "batch_size": batch_size,
        "max_concurrency": max_concurrency,
        "rate": rate,
        "max_failures": max_failures,
        "stale_only": stale_only or None,
        "lock_timeout": lock_timeout,
        "statement_timeout": statement_timeout,
        "max_batch_latency": max_batch_latency,
    }
    if plan_file is not None:
        given = sorted(k for k, v in flags.items() if v is not None and k != "model")
        if given:
            raise UsageError(f"--file takes every parameter from the plan; drop --{given[0]}")
        values, text = op.read_plan_file(plan_file)
        if model is not None and values.get("model") != model:
            raise UsageError(f"{plan_file} is a plan for {values.get('model')!r}, not {model!r}")
        request = op.request_from(values, str(plan_file), text)
    else:
        request = op.request_from({k: v for k, v in flags.items() if v is not None}, None, None)
    request = replace(request, force_paused=force)
    if approve is not None and not cascade:
        raise UsageError("--approve goes with --cascade: a backfill needs no approval")
    if cascade and distributed:
        raise UsageError("--cascade runs on this machine; drop --distributed")
    if dry_run:
        _dry_run(ctx, as_json, request)
        return
    if distributed:
        from tidegate.domain.clock import SystemTimer
        from tidegate.ops import distributed as queue

        run_batches(
            as_json,
            events,
            lambda flag, progress: queue.start(
                ctx,
                request,
                flag,
                progress.outcome,
                progress.start,
                SystemTimer(),
                progress.unclaimed,
            ),
        )
        return
    after = None
    if cascade:
        from tidegate.ops import cascade as cascading

        cascading.refuse_unapproved(ctx, *op.selected_windows(ctx, request), approve)

        def after(flag: threading.Event, progress: Any, result: Any) -> Any:
            return cascading.run(
                ctx,
                result.run_id,
                result.plan.batch_size,
                result.plan.max_concurrency,
                flag,
                progress.outcome,
                progress.start,
            )

    run_batches(
        as_json,
        events,
        lambda flag, progress: op.start(
            ctx,
            request,
            flag,
            progress.outcome,
            progress.start,
            on_throttle=progress.throttle,
            watch=progress,
        ),
        after=after,
    )


def _detach(ctx: Any, as_json: bool) -> None:
    """This command line again without --detach, in a background process of its own."""
    from tidegate import detach

    arguments = detach.command_line(click.get_current_context(), frozenset({"detach", "as_json"}))
    # the project is read here: a folder that is no project is refused before anything starts
    started = detach.start(arguments, ctx.project.root, ctx.clock)
    document = {
        "schema": "tidegate.backfill-detached/v1",
        "run_id": started.run_id,
        "pid": started.pid,
        "log": str(started.log),
    }
    emit(
        as_json,
        document,
        lambda: echo(
            f"{started.run_id}: running in the background (pid {started.pid}, log "
            f"{started.log}); follow it with tidegate show run {started.run_id}"
        ),
    )


def _dry_run(ctx: Any, as_json: bool, request: Any) -> None:
    from tidegate.ops import backfill as op

    plan, radius = op.dry_run(ctx, request)
    document = {
        "schema": "tidegate.backfill-plan/v1",
        "model": plan.model,
        "version_id": plan.version_id,
        "batch_size": plan.batch_size,
        "max_concurrency": plan.max_concurrency,
        "rate_per_minute": plan.rate_per_minute,
        "stale_only": plan.stale_only,
        **radius,
    }

    def human() -> None:
        echo(f"dry run: backfill {plan.model} with version {plan.version_id}")
        echo(
            f"  partitions   {radius['partitions']} in {radius['batches']} batch(es) of "
            f"up to {plan.batch_size}: {', '.join(radius['ranges']) or 'none'}"
        )
        echo(
            f"  order        {', '.join(radius['first_batches'])}"
            + (", …" if radius["batches"] > len(radius["first_batches"]) else "")
        )
        for name, rows in radius["source_rows"].items():
            echo(f"  reads        {rows:,} rows of source {name}")
        update = radius["update"]
        if update is not None:
            shown = ", ".join(f"{k}: {v:,}" for k, v in list(update["rows_per_chunk"].items())[:5])
            echo(
                f"  updates      {update['rows']:,} rows of table {update['table']} (largest "
                f"chunk {update['largest_chunk_rows']:,} rows, {update['empty_chunks']} empty; "
                f"{shown}{', …' if len(update['rows_per_chunk']) > 5 else ''})"
            )
        echo(
            f"  throttle     {plan.max_concurrency} in flight, "
            f"{plan.rate_per_minute or 'unlimited'} batch starts/min"
        )
        if radius["refused"]:
            echo(
                f"  refused      {', '.join(radius['refused'])}: published already, and an "
                "append without a unique key would duplicate their rows"
            )
        stale = ", ".join(radius["downstream"]) or "none"
        echo(f"  downstream   {stale} (their partitions over this range become stale)")
        estimate = radius["estimated_seconds"]
        echo(
            "  estimate     "
            + (
                f"{estimate:,.0f}s from recorded throughput and the rate"
                if estimate is not None
                else "no recorded throughput yet"
            )
        )
        echo("nothing was written")

    emit(as_json, document, human)


def run_batches(
    as_json: bool,
    events: EventStream | None,
    go: Callable[[threading.Event, Any], Any],
    command: str = "backfill",
    after: Callable[[threading.Event, Any, Any], Any] | None = None,
) -> None:
    """Run a backfill-like command (`backfill`, `recover`) with live progress (and its events),
    Ctrl-C stopping it, and its result and exit code; `after` (a cascade) runs once it
    succeeded."""
    from tidegate.detach import tell_run_id
    from tidegate.domain.attempt import RunStatus
    from tidegate.progress import BackfillProgress

    stop_flag = threading.Event()
    verb = "recomputing" if command == "recover" else "backfilling"
    progress = BackfillProgress(as_json, events, verb, on_run=tell_run_id)
    cascade = None
    with ctrl_c_stops(stop_flag, progress):
        result = go(stop_flag, progress)
        if after is not None and result.status is RunStatus.SUCCEEDED:
            cascade = after(stop_flag, progress, result)
    report = result.report
    document = {
        "run_id": result.run_id,
        "status": result.status.value,
        "reason": result.reason,
        "published": report.published,
        "failed": report.failed,
        "skipped": report.skipped,
        "rows": report.rows,
        "source_rows": report.progress.source_rows,
        "trigger": None
        if report.trigger is None
        else {
            "name": report.trigger.name,
            "partition": report.trigger.partition,
            "detail": report.trigger.detail,
        },
        "notes": list(result.notes),
        "nothing_to_resume": False,
    }
    document["cascade"] = None if cascade is None else cascade.document()
    progress.end(document)
    if as_json:
        # the one document on stdout, whatever the outcome: the exit code tells it too
        emit(True, {"schema": RESULT_SCHEMA, **document}, lambda: None)
    else:
        echo(
            f"{result.run_id}: {result.status.value}; {report.published} published"
            + (f" ({progress.published}{progress.of_total()} in all)" if progress.before else "")
            + ", "
            f"{report.failed} failed, {report.skipped} skipped, {report.rows:,} rows"
            + (f" — {result.reason}" if result.reason else "")
        )
        for note in result.notes:
            echo(f"  {note}")
        if cascade is not None:
            show_cascade(cascade)
    if cascade is not None:
        cascade_exit(cascade, stop_flag)
    if result.status is RunStatus.STOPPED:
        if stop_flag.is_set():
            # what the operator asked for, not an error: one line, with what to run next
            echo(
                f"stopped on request (Ctrl-C): {progress.published}{progress.of_total()} "
                f"published; resume with tidegate {command} resume {result.run_id}",
                err=True,
            )
            sys.exit(INTERRUPTED_EXIT)
        fail(f"{command} {result.run_id} stopped on request; resumable", STOPPED_EXIT, False)
    if result.status is not RunStatus.SUCCEEDED:
        fail(f"{command} {result.run_id} failed: {result.reason}", 1, False)


def show_cascade(cascade: Any) -> None:
    if not cascade.results:
        echo("cascade: nothing downstream went stale")
    for result in cascade.results:
        steps = ", ".join(f"{s.model} ({s.partitions})" for s in result.plan.steps)
        echo(f"cascade {result.run_id}: {result.status.value}; recomputed {steps}")
        for note in result.notes:
            echo(f"  {note}")


def cascade_exit(cascade: Any, stop_flag: threading.Event) -> None:
    """A cascade that did not finish exits as the recovery it ran would."""
    from tidegate.domain.attempt import RunStatus

    if cascade.status is RunStatus.SUCCEEDED:
        return
    last = cascade.results[-1]
    resume = f"`tidegate recover resume {last.run_id}`"
    if cascade.status is RunStatus.STOPPED:
        code = INTERRUPTED_EXIT if stop_flag.is_set() else STOPPED_EXIT
        fail(f"cascade {last.run_id} stopped; resume with {resume}", code, False)
    fail(f"cascade {last.run_id} failed: {last.reason}", 1, False)


@backfill.command("resume")
@click.argument("run_id", cls=Argument, help="The backfill's run id.")
@click.option("--wait", is_flag=True, help="Wait for another writer instead of exiting 4.")
@common
@streams_events
def resume(ctx: Any, as_json: bool, events: EventStream | None, run_id: str, wait: bool) -> None:
    """Continue a stopped or failed backfill from its checkpoints, with its recorded plan."""
    from tidegate.ops import backfill as op

    if resumed_already(ctx, as_json, events, run_id, op.KIND):
        return
    run = op.run_of(ctx, run_id)
    if run.distributed:
        from tidegate.domain.clock import SystemTimer
        from tidegate.ops import distributed as queue

        run_batches(
            as_json,
            events,
            lambda flag, progress: queue.resume(
                ctx, run, flag, progress.outcome, progress.start, SystemTimer(), progress.unclaimed
            ),
        )
        return
    run_batches(
        as_json,
        events,
        lambda flag, progress: op.resume(
            ctx,
            run_id,
            flag,
            progress.outcome,
            progress.start,
            on_throttle=progress.throttle,
            watch=progress,
        ),
    )


def resumed_already(
    ctx: Any, as_json: bool, events: EventStream | None, run_id: str, kind: str
) -> bool:
    """Whether the run succeeded already; then say so, as the end of a run that did nothing
    (the result document, and the end event)."""
    from tidegate.ops import backfill as op

    run = op.already_succeeded(ctx, run_id, kind)
    if run is None:
        return False
    reason = op.nothing_to_resume(run)
    document: dict[str, Any] = {
        "run_id": run.run_id,
        "status": run.status.value,
        "reason": reason,
        "published": 0,
        "failed": 0,
        "skipped": 0,
        "rows": 0,
        "source_rows": 0,
        "trigger": None,
        "notes": [],
        "cascade": None,
        "nothing_to_resume": True,
    }
    if events is not None:
        events.write({"schema": "tidegate.backfill-event/v1", "event": "end", **document})
    emit(as_json, {"schema": RESULT_SCHEMA, **document}, lambda: echo(reason))
    return True


@backfill.command("stop")
@click.argument("run_id", cls=Argument, help="The backfill's run id.")
@common
def stop(ctx: Any, as_json: bool, run_id: str) -> None:
    """Ask a running backfill to stop after its in-flight batches."""

    request_stop(ctx, as_json, run_id, "backfill")


def request_stop(ctx: Any, as_json: bool, run_id: str, kind: str) -> None:
    from tidegate.ops import backfill as op

    run = op.stop(ctx, run_id, kind)
    emit(
        as_json,
        {"schema": "tidegate.backfill-stop/v1", "run_id": run.run_id, "stop_requested": True},
        lambda: echo(f"{run.run_id}: stop requested; in-flight batches finish first"),
    )


@backfill.command("list")
@common
def list_runs(ctx: Any, as_json: bool) -> None:
    """Backfills, newest first."""
    from tidegate.ops import backfill as op

    found = op.runs(ctx)
    listed: list[dict[str, Any]] = [
        {
            "run_id": r.run_id,
            "model": r.models[0] if r.models else None,
            "partitions": r.partitions,
            "status": r.status.value,
            "reason": r.reason,
            "requester": r.requester,
            "started_at": r.started_at,
            "ended_at": r.ended_at,
            "plan_hash": r.plan_hash,
        }
        for r in found
    ]
    document = {"schema": "tidegate.backfill-list/v1", "runs": listed}

    def human() -> None:
        for r in listed:
            echo(
                f"{r['run_id']}  {r['model']}  {r['partitions']}  {r['status']}"
                + (f"  ({r['reason']})" if r["reason"] else "")
            )
        if not found:
            echo("no backfills yet")

    emit(as_json, document, human)
