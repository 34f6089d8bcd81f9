"""`tidegate report --out FILE.html` and `tidegate ui [--port N]`: see the ledger (docs/design.md
§6).

Both read only the ledger, never the warehouse, so they work while a backfill runs.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from tidegate.cli import common, emit
from tidegate.terminal import echo

DEFAULT_PORT = 8765


@click.command()
@click.option(
    "--out",
    default="report.html",
    show_default=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The HTML file to write (one self-contained file; opens with no network).",
)
@common
def report(ctx: Any, as_json: bool, out: Path) -> None:
    """Write an HTML report of partitions, runs, deploys, checks, taints and notices."""
    from tidegate.report.data import build_view
    from tidegate.report.page import render

    began = time.monotonic()
    folder = out.parent
    if not folder.is_dir():
        from tidegate.domain.errors import UsageError

        raise UsageError(f"--out {out}: folder {folder} does not exist")
    view = build_view(ctx, details=True)
    text = render(view, live=False).encode("utf-8")
    _write(out, text)
    document = {
        "schema": "tidegate.report/v1",
        "path": str(out.resolve()),
        "bytes": len(text),
        "as_of": view["as_of"],
        "models": [
            {"model": m["name"], "grain": m["grain"], "partitions": m["n"], "counts": m["counts"]}
            for m in view["models"]
        ],
        "runs": len(view["runs"]),
        "seconds": round(time.monotonic() - began, 3),
    }
    emit(as_json, document, lambda: _human(document, view["states"]))


def _write(out: Path, text: bytes) -> None:
    """Write `out` whole or not at all: a reader never sees half a report."""
    from tidegate.domain.errors import UsageError

    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(text)
            os.chmod(temporary, 0o644)
            os.replace(temporary, out)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as error:
        raise UsageError(f"--out {out}: cannot write ({error.strerror or error})") from None


def _human(document: dict[str, Any], states: list[str]) -> None:
    from tidegate.render import Table, console

    table = Table("model", "grain", "partitions", *states)
    for m in document["models"]:
        table.add_row(
            m["model"], m["grain"], f"{m['partitions']:,}", *(f"{m['counts'][s]:,}" for s in states)
        )
    console.print(table)
    console.print(
        f"wrote {document['path']} ({document['bytes'] / 1e6:.1f} MB, "
        f"{document['runs']} recent runs) in {document['seconds']:.1f}s"
    )


@click.command()
@click.option(
    "--port",
    default=DEFAULT_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port on 127.0.0.1 (0: any free one).",
)
@common
def ui(ctx: Any, as_json: bool, port: int) -> None:
    """Serve the report's views live on 127.0.0.1 (read-only), plus /api/status."""
    from tidegate.report.server import UIServer, Views

    views = Views(ctx)
    views.view(None)  # a project or ledger that cannot be read fails here, before listening
    server = UIServer(views, port)
    document = {
        "schema": "tidegate.ui/v1",
        "url": server.url,
        "port": server.port,
        "project": ctx.project.settings.project.name,
    }
    if as_json:  # one line, printed once listening, like the events of a backfill
        click.echo(json.dumps(document))
    else:
        echo(f"tidegate ui for {document['project']} at {server.url} (read-only; Ctrl-C stops)")
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
