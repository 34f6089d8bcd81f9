"""`tidegate verify`: the ledger against the warehouse (and `--rebuild-ledger`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from tidegate.cli import Argument, common, emit, fail

if TYPE_CHECKING:
    from tidegate.domain.model import ModelSpec
    from tidegate.ops.context import Context
    from tidegate.ops.rebuild import Rebuilt
    from tidegate.ops.verify import Verified

SCHEMA = "tidegate.verify/v1"


@click.command()
@click.argument(
    "model", required=False, cls=Argument, help="Only this model (default: every model)."
)
@click.option("--partitions", default=None, help="Only START..END of MODEL.")
@click.option(
    "--checksums", is_flag=True, help="Compare the rows' checksums too (one pass per model)."
)
@click.option(
    "--sample",
    "sample_size",
    type=int,
    default=None,
    help="Partitions per model whose checksums are compared (default: all up to 1,000).",
)
@click.option(
    "--repair", is_flag=True, help="Mark what diverged in the ledger (missing, diverged)."
)
@click.option(
    "--rebuild-ledger",
    is_flag=True,
    help="Fill an empty ledger from the warehouse's commit markers.",
)
@click.option(
    "--wait", is_flag=True, help="Wait for a writer holding the warehouse instead of exiting 4."
)
@common
def verify(
    ctx: Context,
    as_json: bool,
    model: str | None,
    partitions: str | None,
    checksums: bool,
    sample_size: int | None,
    repair: bool,
    rebuild_ledger: bool,
    wait: bool,
) -> None:
    """Compare the ledger with the warehouse: every published partition has its table, its
    commit marker names the published attempt (and, with --checksums, its rows are what was
    published). Exit 1 when anything diverged."""
    if rebuild_ledger:
        if model or partitions or checksums or sample_size is not None or repair:
            fail(
                "--rebuild-ledger takes no MODEL, --partitions, --checksums, --sample or --repair",
                2,
                as_json,
            )
        _rebuild(ctx, as_json)
        return
    from tidegate import render
    from tidegate.ops.verify import verify as verify_op

    done = verify_op(ctx, model, partitions, checksums, sample_size, repair)
    document = verify_doc(done)
    emit(as_json, document, lambda: render.verify(document))
    if document["findings"]:
        fail(f"{len(document['findings'])} partition(s) diverged from the ledger", 1, as_json=False)


def _rebuild(ctx: Context, as_json: bool) -> None:
    from tidegate import render
    from tidegate.ops.rebuild import rebuild_ledger

    document = rebuilt_doc(ctx.project.settings.project.name, rebuild_ledger(ctx))
    emit(as_json, document, lambda: render.verify(document))


def _label(spec: ModelSpec, start: int, end: int) -> str:
    return spec.span(start, end).label(spec.keys)


def verify_doc(done: Verified) -> dict[str, Any]:
    models = []
    findings = []
    for report in done.models:
        models.append(
            {
                "model": report.model,
                "published": report.published,
                "markers": report.markers,
                "checksums": {
                    "how": report.checksums.how,
                    "compared": report.checksums.compared,
                    "note": report.checksums.note,
                },
                "findings": len(report.findings),
            }
        )
        findings += [
            {
                "model": f.model,
                "kind": f.kind.value,
                "partition": _label(report.spec, f.start, f.end),
                "attempt_id": f.attempt_id,
                "expected": f.expected,
                "found": f.found,
            }
            for f in report.findings
        ]
    return {
        "schema": SCHEMA,
        "clean": not findings,
        "models": models,
        "findings": findings,
        "marked": done.marked,
        "repaired": [
            {
                "model": r.model,
                "kind": r.kind.value,
                "taint_id": r.taint_id,
                "marked": r.marked,
                "already_marked": r.already,
            }
            for r in done.repaired
        ],
        "rebuilt": None,
    }


def rebuilt_doc(project: str, rebuilt: Rebuilt) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "clean": True,
        "models": [],
        "findings": [],
        "marked": {},
        "repaired": [],
        "rebuilt": {
            "project": project,
            "markers": rebuilt.markers,
            "runs": rebuilt.runs,
            "versions_matched": list(rebuilt.matched),
            "versions_lost": list(rebuilt.lost),
            "activated": dict(rebuilt.activated),
        },
    }
