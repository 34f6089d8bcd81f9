"""`tidegate rerun (RUN_ID | MODEL)`: the rerun judgment, then the rerun it allows."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tidegate.cli import Argument, common, emit, fail, streams_events

if TYPE_CHECKING:
    from tidegate.event_stream import EventStream
    from tidegate.ops.cascade import Cascade
    from tidegate.ops.rerun import Plan, Result


@click.command()
@click.argument(
    "run_id",
    metavar="(RUN_ID | MODEL)",
    required=False,
    cls=Argument,
    help="A run, whose failed, skipped and never-started partitions are selected; or a model, "
    "with --partitions.",
)
@click.option("--model", default=None, help="Which model, when the run wrote several.")
@click.option("--partitions", default=None, help="Rerun this range instead (START..END).")
@click.option("--version", "version_ref", default=None, help="Rerun with vN (default: active).")
@click.option("--dry-run", is_flag=True, help="Print the judgment; touch nothing.")
@click.option("--approve", default=None, help="Approve what needs it, with this reason.")
@click.option("--as", "approver", default=None, help="Who approves (default: the OS user).")
@click.option(
    "--file",
    "plan_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Take the run, selection, version and approval from a reviewed plan file.",
)
@click.option(
    "--cascade",
    is_flag=True,
    help="Then recompute what the rerun left stale downstream, upstream first.",
)
@click.option("--wait", is_flag=True, help="Wait for another writer instead of exiting 4.")
@common
@streams_events
def rerun(
    ctx: Any,
    as_json: bool,
    events: EventStream | None,
    run_id: str,
    model: str | None,
    partitions: str | None,
    version_ref: str | None,
    dry_run: bool,
    approve: str | None,
    approver: str | None,
    plan_file: Path | None,
    cascade: bool,
    wait: bool,
) -> None:
    """Judge what rerunning RUN_ID's failed and never-started partitions would do, then do it;
    or MODEL's --partitions, whichever runs wrote them."""
    from tidegate.cli_backfill import cascade_exit, ctrl_c_stops, show_cascade
    from tidegate.domain.errors import UsageError
    from tidegate.ops import cascade as cascading
    from tidegate.ops import rerun as op
    from tidegate.ops.backfill import read_plan_file
    from tidegate.ops.preflight import refuse_unready_now
    from tidegate.progress import BackfillProgress

    text = None
    if plan_file is not None:
        flags = {
            "--model": model,
            "--partitions": partitions,
            "--version": version_ref,
            "--approve": approve,
            "--as": approver,
        }
        given = sorted(k for k, v in flags.items() if v is not None)
        if given:
            raise UsageError(f"--file takes every parameter from the plan; drop {given[0]}")
        values, text = read_plan_file(plan_file)
        planned = op.from_file(values, str(plan_file))
        if run_id is not None and run_id != planned["target"]:
            raise UsageError(f"{plan_file} is a plan for {planned['target']}, not {run_id}")
        run_id, partitions = planned["target"], planned["partitions"]
        model = planned["model"] if planned["run_id"] else None
        version_ref, approve, approver = planned["version"], planned["approve"], planned["approver"]
    if run_id is None:
        raise UsageError(
            "name what to rerun: tidegate rerun RUN_ID, tidegate rerun MODEL --partitions RANGE "
            "(or --file PLAN.toml)"
        )
    if approver is not None:
        ctx = replace(ctx, actor=approver)
    plan = op.judge_target(ctx, run_id, model, partitions, version_ref)
    if dry_run:
        refuse_unready_now(ctx, plan.version)
        emit(as_json, rerun_document(plan, None), lambda: show_judgment(plan))
        return
    if not as_json:
        show_judgment(plan)
    if cascade:
        windows = [(j.facts.start, j.facts.end) for j in plan.to_run]
        cascading.refuse_unapproved(ctx, plan.model, windows, approve)
    result = op.rerun(ctx, plan, approve, str(plan_file) if plan_file else None, text)
    done = None
    if cascade and result.status.value == "succeeded":
        stop_flag = threading.Event()
        # a rerun's --json is one document: the cascade's progress goes to people and events
        progress = BackfillProgress(as_json, events, "recomputing")
        with ctrl_c_stops(stop_flag, progress):
            done = cascading.run(
                ctx,
                result.run_id,
                cascading.DEFAULT_BATCH_SIZE,
                1,
                stop_flag,
                progress.outcome,
                progress.start,
            )
    document = rerun_document(plan, result, done)

    def human() -> None:
        show_result(result)
        if done is not None:
            show_cascade(done)

    emit(as_json, document, human)
    if result.status.value != "succeeded":
        fail(f"rerun {result.run_id} failed: {result.reason}", 1, as_json=False)
    if done is not None:
        cascade_exit(done, stop_flag)


def rerun_document(
    plan: Plan, result: Result | None, cascade: Cascade | None = None
) -> dict[str, Any]:
    from tidegate.ops.rerun import plan_document

    approval = result.approval if result else None
    return {
        "schema": "tidegate.rerun/v1",
        **plan_document(plan, approval),
        "dry_run": result is None,
        "run_id": result.run_id if result else None,
        "status": result.status.value if result else None,
        "reason": result.reason if result else None,
        "outcomes": [
            {
                "partition": o.label,
                "state": o.state.value,
                "checksum": o.checksum,
                "reason": o.reason,
            }
            for o in (result.outcomes if result else ())
        ],
        "proofs": [
            {
                "partition": p.partition,
                "before": p.before,
                "after": p.after,
                "same_inputs": p.same_inputs,
                "deterministic": p.deterministic,
            }
            for p in (result.proofs if result else ())
        ],
        "notes": list(result.notes) if result else [],
        "cascade": None if cascade is None else cascade.document(),
    }


def show_judgment(plan: Plan) -> None:
    from tidegate.render import Table, console

    scope = f"{plan.model} in {plan.of_run}" if plan.of_run else plan.scope
    console.print(
        f"rerun judgment for {scope}, with v{plan.version.seq} ({plan.version.version_id}):"
    )
    spec = plan.version.spec
    key = ", ".join(spec.unique_key) or "no unique key"
    console.print(f"write mode {spec.write_mode.value} ({key})")
    table = Table("partition", "state", "written by", "read by", "taint", "verdict", "reason")
    for j in plan.judgments:
        f = j.facts
        writer = f"{f.writer_version} in {f.writer_run}" if f.writer_version else "-"
        table.add_row(
            f.label,
            f.state or "never started",
            writer,
            ", ".join(f.read_by) or "-",
            f.taint or "-",
            j.verdict.value,
            j.reason,
        )
    console.print(table)


def show_result(result: Result) -> None:
    from tidegate.render import console

    published = sum(o.state.value == "published" for o in result.outcomes)
    console.print(
        f"{result.run_id}: {result.status.value}; {published} of {len(result.outcomes)} "
        "partition(s) published"
        + (
            f"; approved by {result.approval.by}: {result.approval.reason}"
            if result.approval
            else ""
        )
    )
    for o in result.outcomes:
        if o.state.value != "published":
            console.print(f"  {o.label}: {o.state.value} — {o.reason}")
    for p in result.proofs:
        verdict = {
            True: "the earlier attempt's checksum: restored" if p.restored else "",
            False: "NOT the earlier attempt's checksum" if p.restored else "",
            None: "",
        }[p.deterministic] or {
            True: "same checksum: deterministic",
            False: "DIFFERENT checksum on the same inputs: not deterministic",
            None: "inputs changed since (late rows): nothing to prove",
        }[p.deterministic]
        console.print(f"  {p.partition}: {p.before} → {p.after}: {verdict}")
    for note in result.notes:
        console.print(note, markup=False, highlight=False)
