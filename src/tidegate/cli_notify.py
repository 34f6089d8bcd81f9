"""`tidegate deliver`: send what the outbox still holds (for cron, after a target was down)."""

from __future__ import annotations

from typing import Any

import click

from tidegate.cli import common, emit
from tidegate.terminal import echo


@click.command()
@common
def deliver(ctx: Any, as_json: bool) -> None:
    """Deliver the notifications still in the outbox; what fails stays there, with its retry."""
    from tidegate.ops.announce import describe, flush

    report = flush(ctx)
    document = {
        "schema": "tidegate.deliver/v1",
        "delivered": len(report.delivered),
        "kept": [
            {
                "target": f.target,
                "attempts": f.attempts,
                "error": f.error,
                "next_attempt_at": f.next_attempt_at,
            }
            for f in report.failures
        ],
    }
    emit(
        as_json,
        document,
        lambda: echo("\n".join(describe(report)) or "nothing to deliver"),
    )
