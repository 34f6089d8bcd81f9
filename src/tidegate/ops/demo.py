"""Demo: the main job end to end on the embedded default, in a temporary project."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidegate.domain.attempt import RunStatus
from tidegate.domain.errors import OperationFailed, UsageError
from tidegate.ops import backfill as backfill_op
from tidegate.ops import build as build_op
from tidegate.ops import deploy as deploy_op
from tidegate.ops import init as init_op
from tidegate.ops import status as status_op
from tidegate.ops.context import Context

DEFAULT_ROWS_PER_DAY = 1000
# (model, range, batch size): the year as real backfills, two batches in flight
DEMO_BACKFILLS = (
    ("daily_revenue", "2025-01-01..2025-12-31", 7),
    ("monthly_revenue", "2025-01..2025-12", 3),
    ("revenue_report", "2025-01..2025-12", 3),
)
CONCURRENCY = 2


@dataclass(frozen=True)
class DemoResult:
    root: Path | None
    orders_rows: int
    runs: tuple[backfill_op.Result, ...]
    status: dict[str, Any]
    seconds: float


def _backfill(ctx: Context, model: str, partitions: str, batch_size: int) -> backfill_op.Result:
    request = backfill_op.Request(
        model=model, partitions=partitions, batch_size=batch_size, max_concurrency=CONCURRENCY
    )
    return backfill_op.start(ctx, request, threading.Event(), lambda _: None, lambda *_: None)


def demo(
    rows_per_day: int,
    keep: Path | None,
    seed: int,
    context: Callable[[Path], Context],
    say: Callable[[str], None],
) -> DemoResult:
    if keep is not None and keep.exists() and any(keep.iterdir()):
        raise UsageError(f"--keep {keep}: the folder is not empty")
    began = time.monotonic()
    root = keep or Path(tempfile.mkdtemp(prefix="tidegate-demo-"))
    try:
        initialized = init_op.init(root, "orders", rows_per_day, seed)
        say(
            f"generated {initialized.orders_rows:,} orders for 2025 into {root / init_op.WAREHOUSE}"
        )
        ctx = context(root)
        try:
            for built in build_op.build(ctx):
                say(
                    f"built {built.version.model} v{built.version.seq} "
                    f"({built.version.version_id}): {built.change.value}"
                )
            for name in ctx.project.order:
                deployed = deploy_op.deploy(ctx, name, None)
                say(f"deployed {name} v{deployed.version.seq}")
            runs = []
            for name, partitions, batch_size in DEMO_BACKFILLS:
                result = _backfill(ctx, name, partitions, batch_size)
                runs.append(result)
                report = result.report
                reconciled = "reconciled exactly" if name != "revenue_report" else "checked"
                say(
                    f"backfilled {name} {partitions} in {result.run_id}: "
                    f"{report.published} partition(s), {report.rows:,} rows, batches of "
                    f"{batch_size}, {CONCURRENCY} in flight, {reconciled}"
                )
                if result.status is not RunStatus.SUCCEEDED:
                    raise OperationFailed(
                        f"demo backfill {result.run_id} failed: see `tidegate show run`"
                    )
            document = status_op.status(ctx)
        finally:
            ctx.close()
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return DemoResult(
        keep, initialized.orders_rows or 0, tuple(runs), document, time.monotonic() - began
    )
