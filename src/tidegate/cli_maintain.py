"""`tidegate maintain [MODEL]`: expire the Iceberg tables' old snapshots and remove their files."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import click

from tidegate.cli import Argument, common, emit

if TYPE_CHECKING:
    from tidegate.ops.context import Context
    from tidegate.ops.maintain import Maintained

SCHEMA = "tidegate.maintain/v1"


@click.command()
@click.argument(
    "model", required=False, cls=Argument, help="Only this model's table (default: every one)."
)
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@click.option("--wait", is_flag=True, help="Wait for another writer instead of exiting 4.")
@common
def maintain(ctx: Context, as_json: bool, model: str | None, dry_run: bool, wait: bool) -> None:
    """Keep the Iceberg tables small: remove leftover tidegate-* branches, expire the snapshots
    older than [warehouse] keep whose partitions were published again since, and delete the
    files no kept snapshot references. Each partition's current snapshot is kept, so that
    verify and restore of the current attempts work."""
    from tidegate.ops.maintain import maintain as maintain_op

    document = maintain_document(maintain_op(ctx, model, dry_run))
    emit(as_json, document, lambda: _show(document))


def maintain_document(done: Maintained) -> dict[str, Any]:
    tables: list[dict[str, Any]] = [
        {
            "table": t.table,
            "model": t.name,
            "branches": list(t.branches),
            "snapshots": [
                {
                    "snapshot_id": s.snapshot_id,
                    "committed_at": _when(s.committed_at),
                    "attempts": list(s.attempts),
                }
                for s in t.snapshots
            ],
            "files": [{"path": f.path, "bytes": f.size} for f in t.files],
            "bytes": t.size,
            "kept_snapshots": t.kept,
        }
        for t in done.tables
    ]
    return {
        "schema": SCHEMA,
        "dry_run": done.dry_run,
        "keep": done.keep,
        "before": done.before.astimezone(timezone.utc).isoformat(timespec="seconds"),
        "tables": tables,
        "removed": {
            "branches": sum(len(t.branches) for t in done.tables),
            "snapshots": sum(len(t.snapshots) for t in done.tables),
            "files": sum(len(t.files) for t in done.tables),
            "bytes": sum(t.size for t in done.tables),
        },
    }


def _when(millis: int) -> str:
    return datetime.fromtimestamp(millis / 1000, timezone.utc).isoformat(timespec="seconds")


def _show(document: dict[str, Any]) -> None:
    from tidegate.render import console

    verb = "would remove" if document["dry_run"] else "removed"
    console.print(
        f"keep {document['keep']}: snapshots and files before {document['before']} may go",
        highlight=False,
    )
    for table in document["tables"]:
        console.print(
            f"{table['table']}: {verb} {len(table['branches'])} branch(es), "
            f"{len(table['snapshots'])} snapshot(s), {len(table['files'])} file(s) "
            f"({_size(table['bytes'])}); {table['kept_snapshots']} snapshot(s) kept",
            highlight=False,
        )
        for branch in table["branches"]:
            console.print(f"  branch {branch}", highlight=False)
        for snapshot in table["snapshots"]:
            named = snapshot["attempts"]
            attempts = named[0] if named else "no markers"
            if len(named) > 1:
                attempts += f" and {len(named) - 1} more attempt(s)"
            console.print(
                f"  snapshot {snapshot['snapshot_id']} of {snapshot['committed_at']} ({attempts})",
                highlight=False,
            )
        for file in table["files"]:
            console.print(f"  file {file['path']} ({_size(file['bytes'])})", highlight=False)
    removed = document["removed"]
    console.print(
        f"{verb} {removed['branches']} branch(es), {removed['snapshots']} snapshot(s), "
        f"{removed['files']} file(s), {_size(removed['bytes'])}",
        highlight=False,
    )


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"
