"""The command line: parse, call ops, render, map errors to docs/design.md §6 exit codes."""

from __future__ import annotations

import functools
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from tidegate.domain.clock import Clock, FixedClock, SystemClock, parse_as_of
from tidegate.domain.errors import TidegateError
from tidegate.terminal import echo

F = TypeVar("F", bound=Callable[..., Any])
INTERRUPTED_EXIT = 130


class Argument(click.Argument):
    """A positional argument with a description (`help`), which click's own takes only from
    click 8.5 on: `@click.argument("model", cls=Argument, help="…")`."""

    def __init__(
        self,
        param_decls: Sequence[str],
        required: bool | None = None,
        help: str | None = None,
        **attrs: Any,
    ) -> None:
        super().__init__(param_decls, required=required, **attrs)
        self.help = help


def _parse_as_of(value: str | None) -> Clock:
    return SystemClock() if value is None else FixedClock(parse_as_of(value))


def common(command: F) -> F:
    """--project, --json, --debug and --as-of, taken by every command."""

    @click.option(
        "--project",
        "project_dir",
        default=".",
        show_default=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="Project folder.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
    @click.option("--debug", is_flag=True, help="Show tracebacks.")
    @click.option("--as-of", "as_of", default=None, help="What 'now' is (ISO timestamp).")
    @functools.wraps(command)
    def wrapper(
        project_dir: Path, as_json: bool, debug: bool, as_of: str | None, **kwargs: Any
    ) -> Any:
        from tidegate.ops.context import Context

        ctx = Context(project_dir, clock=_parse_as_of(as_of), wait=bool(kwargs.get("wait")))
        try:
            return command(ctx, as_json, **kwargs)
        finally:
            ctx.close()

    return wrapper  # type: ignore[return-value]


def streams_events(command: F) -> F:
    """--events and --events-file, taken by commands that report progress as they go: the
    command gets `events`, the stream they ask for (None: no events)."""

    @click.option(
        "--events",
        type=click.Choice(["jsonl"]),
        default=None,
        help="Progress events as JSON lines on stderr (or in --events-file), apart from the "
        "result on stdout.",
    )
    @click.option(
        "--events-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Append the progress events (JSON lines) to this file.",
    )
    @functools.wraps(command)
    def wrapper(*args: Any, events: str | None, events_file: Path | None, **kwargs: Any) -> Any:
        from tidegate.event_stream import EventStream

        stream = EventStream.open(events, events_file)
        try:
            return command(*args, events=stream, **kwargs)
        finally:
            if stream is not None:
                stream.close()

    return wrapper  # type: ignore[return-value]


def emit(as_json: bool, document: dict[str, Any], human: Callable[[], None]) -> None:
    if as_json:
        click.echo(json.dumps(document, indent=2, sort_keys=False, default=str))
    else:
        human()


def _print_version(context: click.Context, _: click.Parameter, asked: bool) -> None:
    if not asked or context.resilient_parsing:
        return
    from tidegate import __version__

    libraries = (("duckdb", "DuckDB"), ("sqlglot", "sqlglot"))
    engines = ", ".join(f"{shown} {_installed(name)}" for name, shown in libraries)
    echo(f"tidegate {__version__} ({engines}; Python {sys.version.split()[0]})")
    context.exit()


def _installed(distribution: str) -> str:
    """A library's installed version, read from its metadata (importing it would cost time)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"


# the commands kept in modules of their own, by name: a module is imported when one of its
# commands is called (or help lists them), so a command does not pay for every other's imports
ELSEWHERE = {
    **dict.fromkeys(("validate", "deploy", "rollback", "pause", "unpause"), "cli_lifecycle"),
    "backfill": "cli_backfill",
    "rerun": "cli_rerun",
    "restore": "cli_restore",
    "worker": "cli_worker",
    "maintain": "cli_maintain",
    **dict.fromkeys(("taint", "recover", "ack"), "cli_recover"),
    "deliver": "cli_notify",
    "diff": "cli_diff",
    "verify": "cli_verify",
    **dict.fromkeys(("report", "ui"), "cli_report"),
    "stream": "cli_stream",
}


class Commands(click.Group):
    """tidegate's group: the commands of ELSEWHERE imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *ELSEWHERE})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in ELSEWHERE and cmd_name not in self.commands:
            module = importlib.import_module(f"tidegate.{ELSEWHERE[cmd_name]}")
            self.add_command(getattr(module, cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)


def subcommands(group: click.Group) -> dict[str, click.Command]:
    """Every subcommand of `group` by name, hidden ones and those imported on demand too."""
    context = click.Context(group)
    found = {name: group.get_command(context, name) for name in group.list_commands(context)}
    return {name: command for name, command in found.items() if command is not None}


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the versions of tidegate, DuckDB, sqlglot and Python, then exit.",
)
def cli() -> None:
    """tidegate: release data pipelines safely — build, validate, deploy, backfill, rerun,
    recover partitioned tables, each step recorded, stoppable, resumable and verifiable."""


FLINK_NEXT = (
    " with the Flink stream example; next: python write_orders.py 3, tidegate build, "
    "tidegate stream start orders_per_day --detach, tidegate deploy orders_per_day"
)


@cli.command()
@click.argument(
    "directory",
    default=".",
    type=click.Path(file_okay=False, path_type=Path),
    cls=Argument,
    help="The folder to scaffold the project in (created if missing; default: the current one).",
)
@click.option(
    "--example",
    type=click.Choice(["orders", "flink"]),
    default=None,
    help="Scaffold the reference orders pipeline and load its data, or (flink) the orders "
    "stream job released by savepoint.",
)
@click.option(
    "--rows-per-day",
    default=1000,
    show_default=True,
    type=int,
    help="With --example: orders generated per day of the example's year.",
)
@click.option(
    "--seed",
    default=1,
    show_default=True,
    type=int,
    help="With --example: seed of the generated orders (the same seed, the same rows).",
)
@click.option(
    "--dbt",
    "dbt",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Control the dbt project in this folder as it is: [dbt] and the warehouse its "
    "profile's target builds into (nothing is written into the dbt project).",
)
@click.option(
    "--dbt-target", default=None, help="With --dbt: the profile's target (default: its own)."
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def init(
    directory: Path,
    example: str | None,
    rows_per_day: int,
    seed: int,
    dbt: Path | None,
    dbt_target: str | None,
    as_json: bool,
    debug: bool,
) -> None:
    """Scaffold a project in DIRECTORY."""
    from tidegate.ops.init import init as init_op
    from tidegate.ops.init import init_dbt

    if dbt is not None and example is not None:
        fail("--dbt and --example scaffold different projects: give one", 2, as_json)
    if dbt_target is not None and dbt is None:
        fail("--dbt-target is for --dbt", 2, as_json)
    done = (
        init_dbt(directory, dbt, dbt_target)
        if dbt is not None
        else init_op(directory, example, rows_per_day, seed)
    )
    document = {
        "schema": "tidegate.init/v1",
        "project": str(done.root),
        "example": done.example,
        "orders_rows": done.orders_rows,
        "dbt": str(dbt) if dbt is not None else None,
    }
    emit(
        as_json,
        document,
        lambda: echo(
            f"initialized {done.root}"
            + (f" with {done.orders_rows:,} orders" if done.orders_rows else "")
            + (FLINK_NEXT if done.example == "flink" else "")
            + (f" for the dbt project {dbt}; next: tidegate build" if dbt is not None else "")
        ),
    )


@cli.command()
@click.option(
    "--rows-per-day",
    default=1000,
    show_default=True,
    type=int,
    help="Orders generated per day of the demo's year.",
)
@click.option(
    "--seed",
    default=1,
    show_default=True,
    type=int,
    help="Seed of the generated orders (the same seed, the same rows).",
)
@click.option(
    "--keep",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Leave the demo project in this folder.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def demo(rows_per_day: int, seed: int, keep: Path | None, as_json: bool, debug: bool) -> None:
    """Run the main job end to end on the embedded default."""
    from tidegate import render
    from tidegate.ops.demo import demo as demo_op

    result = demo_op(rows_per_day, keep, seed, (lambda _: None) if as_json else echo)
    document = {
        "schema": "tidegate.demo/v1",
        "kept": str(result.root) if result.root else None,
        "orders_rows": result.orders_rows,
        "seconds": round(result.seconds, 3),
        "runs": list(result.runs),
        "status": result.status,
    }

    def human() -> None:
        render.status(result.status)
        echo(
            f"done in {result.seconds:.1f}s"
            + (f"; project kept in {result.root}" if result.root else "")
        )

    emit(as_json, document, human)


@cli.command()
@common
def build(ctx: Any, as_json: bool) -> None:
    """Snapshot every model into an immutable version; classify changes."""
    from tidegate import render
    from tidegate.ops.build import build as build_op

    built = build_op(ctx)
    dbt = ctx.project.dbt
    document = {
        "schema": "tidegate.build/v1",
        "models": [render.built_doc(b) for b in built],
        "dbt": render.dbt_doc(dbt) if dbt is not None else None,
    }
    emit(as_json, document, lambda: render.build(built, dbt))


@cli.command()
@click.argument(
    "models", nargs=-1, cls=Argument, help="Only these models (default: every unpaused model)."
)
@click.option("--partition", default=None, help="A partition or START..END (needs one MODEL).")
@click.option("--wait", is_flag=True, help="Wait for another writer instead of exiting 4.")
@click.option("--force", is_flag=True, help="Run a paused model's --partition anyway.")
@common
def run(
    ctx: Any,
    as_json: bool,
    models: tuple[str, ...],
    partition: str | None,
    wait: bool,
    force: bool,
) -> None:
    """Scheduler tick: run due partitions of the active versions (or --partition)."""
    from tidegate import render
    from tidegate.ops.run import run as run_op

    result = run_op(ctx, list(models), partition, force=force)
    document = render.run_doc(result)
    emit(as_json, document, lambda: render.run(result))
    if document["status"] == "failed":
        # The run's own document is the --json answer; the failure is one line on stderr.
        fail(f"run {result.run_id} failed: {document['reason']}", 1, as_json=False)


@cli.command()
@click.argument(
    "model", required=False, cls=Argument, help="Only this model, its partitions as ranges."
)
@common
def status(ctx: Any, as_json: bool, model: str | None) -> None:
    """Models, their active versions and partitions (reads only the ledger)."""
    from tidegate import render
    from tidegate.ops.status import status as status_op

    document = status_op(ctx, model)
    emit(as_json, document, lambda: render.status(document))


@cli.group()
def show() -> None:
    """Details of one partition or one run."""


@show.command("partition")
@click.argument("model", cls=Argument, help="The model.")
@click.argument(
    "partition", cls=Argument, help="The partition's label (2025-03-03, 2025-03, a key, …)."
)
@common
def show_partition(ctx: Any, as_json: bool, model: str, partition: str) -> None:
    """Who wrote PARTITION of MODEL, and can it be trusted."""
    from tidegate import render
    from tidegate.ops.status import show_partition as show_op

    document = show_op(ctx, model, partition)
    emit(as_json, document, lambda: render.partition(document))


@show.command("run")
@click.argument("run_id", cls=Argument, help="The run's id (run-…).")
@common
def show_run(ctx: Any, as_json: bool, run_id: str) -> None:
    """A run and its attempts."""
    from tidegate import render
    from tidegate.ops.status import show_run as show_op

    document = show_op(ctx, run_id)
    emit(as_json, document, lambda: render.run_detail(document))


@cli.command()
@click.argument("model", cls=Argument, help="The model.")
@common
def history(ctx: Any, as_json: bool, model: str) -> None:
    """Builds and deploys of MODEL: who, when, why."""
    from tidegate import render
    from tidegate.ops.status import history as history_op

    document = history_op(ctx, model)
    seqs = {v.version_id: v.seq for v in ctx.state.versions(model)}
    emit(as_json, document, lambda: render.history(document, seqs))


def fail(message: str, code: int, as_json: bool) -> None:
    message = " ".join(message.splitlines())  # one line, whatever a name in it contains
    if as_json:
        click.echo(json.dumps({"schema": "tidegate.error/v1", "error": message, "exit_code": code}))
    echo(f"error: {message}", err=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug, as_json = "--debug" in args, "--json" in args
    try:
        cli.main(args=args, prog_name="tidegate", standalone_mode=False)
    except TidegateError as error:
        if debug:
            raise
        fail(str(error), error.exit_code, as_json)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        if debug:
            raise
        fail(error.format_message().replace("\n", " "), 2, as_json)
    except (KeyboardInterrupt, click.exceptions.Abort):
        echo("interrupted", err=True)
        sys.exit(INTERRUPTED_EXIT)
    except Exception as error:  # a bug in tidegate, not a user mistake: still one line
        if debug:
            raise
        fail(
            f"internal error: {type(error).__name__}: {error} (rerun with --debug for the "
            "traceback)",
            1,
            as_json,
        )
