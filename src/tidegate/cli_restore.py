"""`tidegate restore MODEL --partitions RANGE --to RUN|ATTEMPT`: publish again what an earlier
run or attempt published, from the files it wrote (Iceberg tables), judged as a rerun."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from tidegate.cli import Argument, common, emit, fail

if TYPE_CHECKING:
    from tidegate.ops.rerun import Result
    from tidegate.ops.restore import Restoration


@click.command()
@click.argument("model", cls=Argument, help="The model whose partitions come back.")
@click.option("--partitions", required=True, help="The range to restore (START..END).")
@click.option(
    "--to",
    "to",
    required=True,
    help="The run (run-…) or attempt (att-…) whose published rows come back.",
)
@click.option("--dry-run", is_flag=True, help="Print what would come back and the judgment.")
@click.option("--approve", default=None, help="Approve what needs it, with this reason.")
@click.option("--as", "approver", default=None, help="Who approves (default: the OS user).")
@click.option("--wait", is_flag=True, help="Wait for another writer instead of exiting 4.")
@common
def restore(
    ctx: Any,
    as_json: bool,
    model: str,
    partitions: str,
    to: str,
    dry_run: bool,
    approve: str | None,
    approver: str | None,
    wait: bool,
) -> None:
    """Publish MODEL's --partitions again as run or attempt --to published them, from the data
    files it wrote, without computing anything; proves each checksum equals the earlier one."""
    from tidegate.cli_rerun import show_result
    from tidegate.ops import rerun as op
    from tidegate.ops.preflight import refuse_unready_now
    from tidegate.ops.restore import judge_restore

    if approver is not None:
        ctx = replace(ctx, actor=approver)
    restoration = judge_restore(ctx, model, partitions, to)
    plan = restoration.plan
    if dry_run:
        refuse_unready_now(ctx, plan.version)
        emit(as_json, _document(restoration, None), lambda: _show(restoration))
        return
    if not as_json:
        _show(restoration)
    result = op.rerun(ctx, plan, approve, restoring=restoration.origins)
    emit(as_json, _document(restoration, result), lambda: show_result(result))
    if result.status.value != "succeeded":
        fail(f"restore {result.run_id} failed: {result.reason}", 1, as_json=False)


def _show(restoration: Restoration) -> None:
    from tidegate.cli_rerun import show_judgment
    from tidegate.render import console

    for row in restoration.document():
        console.print(
            f"{row['partition']}: back to attempt {row['attempt_id']} of {row['run_id']} "
            f"({row['checksum']})"
        )
    show_judgment(restoration.plan)


def _document(restoration: Restoration, result: Result | None) -> dict[str, Any]:
    from tidegate.cli_rerun import rerun_document

    document = rerun_document(restoration.plan, result)
    del document["cascade"]
    del document["schema"]  # the rerun's: this document is a restore's
    return {"schema": "tidegate.restore/v1", "restored": restoration.document(), **document}
