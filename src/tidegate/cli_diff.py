"""`tidegate diff MODEL --left V1 --right V2`: compare two versions' outputs (docs/design.md §3
Correctness check). Exit 0 when they agree within the tolerance, 1 when they differ beyond it."""

from __future__ import annotations

from typing import Any

import click

from tidegate.cli import Argument, common, emit, fail
from tidegate.terminal import echo

SHOWN_PARTITIONS = 50
SHOWN_LABELS = 5


@click.command()
@click.argument("model", cls=Argument, help="The model whose versions are compared.")
@click.option("--left", "left_ref", required=True, help="The old version: vN or a version id.")
@click.option("--right", "right_ref", required=True, help="The new version: vN or a version id.")
@click.option(
    "--partitions",
    default=None,
    help="START..END in the model's grain (default: every partition either side has output for).",
)
@click.option(
    "--tolerance",
    default=None,
    help="Relative tolerance on column sums and numeric values (default 0: exact).",
)
@click.option("--wait", is_flag=True, help="Wait for a writer holding the warehouse.")
@common
def diff(
    ctx: Any,
    as_json: bool,
    model: str,
    left_ref: str,
    right_ref: str,
    partitions: str | None,
    tolerance: str | None,
    wait: bool,
) -> None:
    """Compare the outputs of two versions of MODEL, partition by partition (read-only)."""
    from tidegate.ops.diff import diff as diff_op

    document = diff_op(ctx, model, left_ref, right_ref, partitions, tolerance)
    emit(as_json, document, lambda: human(document))
    if not document["agree"]:
        summary = document["summary"]
        fail(
            f"{model}: {_name(document['left'])} and {_name(document['right'])} differ in "
            f"{summary['differing']} of {summary['compared']} compared partition(s)",
            1,
            as_json=False,
        )


def _name(version: dict[str, Any]) -> str:
    return f"v{version['seq']}"


def _keys_text(values: dict[str, Any]) -> str:
    return "(" + ", ".join("NULL" if v is None else str(v) for v in values.values()) + ")"


def _differences(entry: dict[str, Any], left: str, right: str) -> str:
    parts = []
    if entry["left"]["rows"] != entry["right"]["rows"]:
        parts.append(f"rows {entry['left']['rows']:,} → {entry['right']['rows']:,}")
    keys = entry["keys"] or {}
    for kind, text in (
        ("only_left", f"only in {left}"),
        ("only_right", f"only in {right}"),
        ("changed", "changed"),
    ):
        found = keys.get(kind)
        if found and found["count"]:
            example = ", ".join(_keys_text(s) for s in found["sample"][:2])
            columns = f" in {', '.join(found['columns'])}" if found["columns"] else ""
            parts.append(f"{found['count']:,} key(s) {text}{columns}, e.g. {example}")
    for col in entry["columns"]:
        if not col["differs"]:
            continue
        if col["sum_left"] != col["sum_right"]:
            parts.append(f"sum({col['column']}) {col['sum_left']} → {col['sum_right']}")
        if col["nulls_left"] != col["nulls_right"]:
            parts.append(f"NULLs in {col['column']} {col['nulls_left']} → {col['nulls_right']}")
    return "; ".join(parts) or "within tolerance"


def human(document: dict[str, Any]) -> None:
    from rich.markup import escape

    from tidegate.render import Table, console

    left, right = _name(document["left"]), _name(document["right"])
    summary = document["summary"]
    columns = document["columns"]
    echo(
        f"diff {document['model']}: {left} ({document['left']['version_id']}) → {right} "
        f"({document['right']['version_id']}), {document['range'] or 'every partition'}, "
        f"tolerance {document['tolerance']}"
    )
    if document["unique_key"]:
        echo(f"  key          {', '.join(document['unique_key'])}")
    else:
        echo(f"  key          none ({document['key_note']})")
    for side, name in (("only_left", left), ("only_right", right)):
        if columns[side]:
            echo(f"  only in {name:<5}{', '.join(columns[side])}")
    for retyped in columns["retyped"]:
        echo(f"  retyped      {retyped['column']}: {retyped['left']} → {retyped['right']}")
    shown = [p for p in document["partitions"] if p["state"] == "different"]
    if shown:
        table = Table("partition", left, right, "rows", "differences")
        for entry in shown[:SHOWN_PARTITIONS]:
            table.add_row(
                escape(entry["partition"]),
                entry["left"]["source"],
                entry["right"]["source"],
                f"{entry['left']['rows']:,} / {entry['right']['rows']:,}",
                escape(_differences(entry, left, right)),
            )
        console.print(table)
        if len(shown) > SHOWN_PARTITIONS:
            echo(f"… and {len(shown) - SHOWN_PARTITIONS} more (--json lists every one)")
    for state, name in (("only_left", left), ("only_right", right)):
        alone = [p["partition"] for p in document["partitions"] if p["state"] == state]
        if alone:
            listed = ", ".join(alone[:SHOWN_LABELS]) + (", …" if len(alone) > SHOWN_LABELS else "")
            echo(f"only {name} has output (not compared): {len(alone)} partition(s): {listed}")
    echo(
        f"{summary['compared']} partition(s) compared: "
        f"{summary['compared'] - summary['differing']} agree, {summary['differing']} differ"
    )
    if document["agree"]:
        echo(f"{left} and {right} agree")
