"""Demo: the main job end to end on the embedded default, in a temporary project."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from tidegate.domain.attempt import RunStatus
from tidegate.domain.clock import FixedClock
from tidegate.domain.errors import OperationFailed, UsageError
from tidegate.domain.rerun import needs_approval
from tidegate.ops import backfill as backfill_op
from tidegate.ops import build as build_op
from tidegate.ops import deploy as deploy_op
from tidegate.ops import init as init_op
from tidegate.ops import rerun as rerun_op
from tidegate.ops import run as run_op
from tidegate.ops import status as status_op
from tidegate.ops import validate as validate_op
from tidegate.ops.context import Context
from tidegate.project.layout import MODELS_DIR, PROJECT_FILE

STORY_V1 = "examples/orders/story/daily_revenue_v1.sql"

DEFAULT_ROWS_PER_DAY = 1000
YEAR = "2025-01-01..2025-12-31"
CONCURRENCY = 2
# The first scheduled run after the year: it publishes 2025-12-31 with the deployed version.
NEXT_TICK = datetime(2026, 1, 1, 3, 0, tzinfo=timezone.utc)
STORY_TWO = "2025-06-01..2025-06-05"
NOTICES = "notices.jsonl"
LINEAGE = "lineage.jsonl"
# the consumer of story 2: finance reads daily_revenue and is told what is published; every
# run's OpenLineage events go to a file, as they would to a lineage backend
FINANCE = f"""
[[notify]]
name = "finance_inbox"
kind = "file"
path = "{NOTICES}"

[[notify]]
name = "lineage"
kind = "file"
path = "{LINEAGE}"
lineage = true

[[consumers]]
name = "finance"
model = "daily_revenue"
notify = "finance_inbox"
"""
DOWNSTREAM = (("monthly_revenue", "2025-01..2025-12", 3), ("revenue_report", "2025-01..2025-12", 3))


@dataclass(frozen=True)
class DemoResult:
    root: Path | None
    orders_rows: int
    runs: tuple[str, ...]
    status: dict[str, Any]
    seconds: float


def demo(rows_per_day: int, keep: Path | None, seed: int, say: Callable[[str], None]) -> DemoResult:
    """The two stories of docs/design.md §2 on the embedded default. 1: daily_revenue v1
    backfilled for 2025; v2 adds net_revenue, is validated on samples, deployed and confirmed
    by the next scheduled run; the history it has not written yet is backfilled (--stale-only),
    reconciled per partition; the downstream models are backfilled from it. 2: a run fails
    writing its third partition; the rerun judgment; the rerun; the consumer's notice."""
    if keep is not None and keep.exists() and any(keep.iterdir()):
        raise UsageError(f"--keep {keep}: the folder is not empty")
    began = time.monotonic()
    root = keep or Path(tempfile.mkdtemp(prefix="tidegate-demo-"))
    try:
        initialized = init_op.init(root, "orders", rows_per_day, seed)
        say(
            f"generated {initialized.orders_rows:,} orders for 2025 into {root / init_op.WAREHOUSE}"
        )
        (root / PROJECT_FILE).write_text((root / PROJECT_FILE).read_text() + FINANCE)
        runs = _story(root, say)
        runs += _story_two(root, say)
        ctx = Context(root)
        try:
            document = status_op.status(ctx)
        finally:
            ctx.close()
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return DemoResult(
        keep, initialized.orders_rows or 0, tuple(runs), document, time.monotonic() - began
    )


def _story(root: Path, say: Callable[[str], None]) -> list[str]:
    daily = root / MODELS_DIR / "daily_revenue.sql"
    with_net = daily.read_text()
    daily.write_text((resources.files("tidegate") / STORY_V1).read_text())
    runs = []
    ctx = Context(root)
    try:
        _build(ctx, say)
        _deploy(ctx, "daily_revenue", say)
        runs.append(_backfill(ctx, "daily_revenue", YEAR, 7, say))
    finally:
        ctx.close()

    say("daily_revenue gains net_revenue:")
    daily.write_text(with_net)
    ctx = Context(root)  # a context reads the project's files once
    try:
        _build(ctx, say)
        gate = validate_op.validate(ctx, "daily_revenue", None, 5, None, seed=0)
        compared = gate.report["diff"]
        same = sum(bool(p["agree"]) for p in compared["partitions"]) if compared else 0
        say(
            f"validated daily_revenue v{gate.report['seq']} on {len(gate.partitions)} sample "
            f"partitions into its shadow table: gate {'passed' if gate.passed else 'FAILED'} "
            f"({gate.report['summary']}); against {compared['against'] if compared else '-'}: "
            f"{same} partition(s) the same on the common columns, new column(s) "
            f"{', '.join(compared['columns']['only_right']) if compared else '-'}"
        )
        if not gate.passed:
            raise OperationFailed(f"demo gate {gate.gate_id} failed: see `tidegate history`")
        _deploy(ctx, "daily_revenue", say)
    finally:
        ctx.close()

    tick = Context(root, clock=FixedClock(NEXT_TICK))
    try:
        ran = run_op.run(tick, ["daily_revenue"], None)
        runs.append(ran.run_id)
        deploy = status_op.status(tick, "daily_revenue")["models"][0]["deploy"]
        say(
            f"scheduled run as of {NEXT_TICK:%Y-%m-%d %H:%M}Z ({ran.run_id}): "
            f"{len(ran.outcomes)} partition published with the new version; deploy "
            f"{deploy['state']} (running {deploy['version']} since that run)"
        )
    finally:
        tick.close()

    ctx = Context(root)
    try:
        runs.append(_backfill(ctx, "daily_revenue", YEAR, 7, say, stale_only=True))
        for name, partitions, batch_size in DOWNSTREAM:
            _deploy(ctx, name, say)
            runs.append(_backfill(ctx, name, partitions, batch_size, say))
    finally:
        ctx.close()
    return runs


def _story_two(root: Path, say: Callable[[str], None]) -> list[str]:
    """Story 2: a run fails writing its third partition; the rerun is judged, then run."""
    say("a run of 2025-06-01..2025-06-05 meets a bad load on its third day:")
    init_op.fault_orders(root / init_op.WAREHOUSE, datetime(2025, 6, 3))
    ctx = Context(root)
    try:
        failed = run_op.run(ctx, ["daily_revenue"], STORY_TWO)
        broken = [o for o in failed.outcomes if o.state.value != "published"]
        say(
            f"run {failed.run_id}: {len(failed.outcomes) - len(broken)} published, "
            + ", ".join(f"{o.label} {o.state.value} ({o.reason})" for o in broken)
        )
        init_op.fault_orders(root / init_op.WAREHOUSE, None)
        say("the load is repaired; the rerun judgment before anything is touched:")
        plan = rerun_op.judge_rerun(ctx, failed.run_id, None, None, None)
        for judged in plan.judgments:
            say(f"  {judged.facts.label}: {judged.verdict.value} — {judged.reason}")
        kept = [j.facts.start for j in plan.judgments if not j.runs]
        before = [_published(ctx, start) for start in kept]
        # the third day still holds story 1's publish, which monthly_revenue and finance read:
        # replacing it is a decision someone signs
        approve = (
            "the load is repaired; the active version recomputes the day it failed"
            if needs_approval(plan.judgments)
            else None
        )
        if approve:
            say(f"approved by {ctx.actor}: {approve}")
        done = rerun_op.rerun(ctx, plan, approve)
        if [_published(ctx, start) for start in kept] != before:
            raise OperationFailed(f"demo rerun {done.run_id} touched a partition it had to keep")
        told = (root / NOTICES).read_text().splitlines()
        say(
            f"rerun {done.run_id}: "
            + ", ".join(f"{o.label} {o.state.value}" for o in done.outcomes)
            + f"; the other days kept their checksums and publish times; finance was notified "
            f"({NOTICES}: "
            f"{json.loads(told[-1])['partitions']})"
        )
        if done.status is not RunStatus.SUCCEEDED:
            raise OperationFailed(f"demo rerun {done.run_id} failed: see `tidegate show run`")
        return [failed.run_id, done.run_id]
    finally:
        ctx.close()


def _published(ctx: Context, start: int) -> tuple[str | None, str | None]:
    row = ctx.state.partition("daily_revenue", start)
    return (row.checksum, row.published_at) if row else (None, None)


def _build(ctx: Context, say: Callable[[str], None]) -> None:
    for built in build_op.build(ctx):
        if built.created:
            say(
                f"built {built.version.model} v{built.version.seq} "
                f"({built.version.version_id}): {built.change.value}"
            )


def _deploy(ctx: Context, model: str, say: Callable[[str], None]) -> None:
    deployed = deploy_op.deploy(ctx, model, None)
    say(f"deployed {model} v{deployed.version.seq} ({deployed.gate})")


def _backfill(
    ctx: Context,
    model: str,
    partitions: str,
    batch_size: int,
    say: Callable[[str], None],
    stale_only: bool = False,
) -> str:
    request = backfill_op.Request(
        model=model,
        partitions=partitions,
        batch_size=batch_size,
        max_concurrency=CONCURRENCY,
        stale_only=stale_only,
    )
    result = backfill_op.start(ctx, request, threading.Event(), lambda _: None, lambda *_: None)
    report = result.report
    version = ctx.state.get_version(result.plan.version_id)
    checked = (
        "reconciled with its source per partition"
        if ctx.project.model(model).reconciliations
        else "checked"
    )
    say(
        f"backfilled {model} {partitions}{' (stale only)' if stale_only else ''} with "
        f"v{version.seq if version else '?'} in {result.run_id}: {report.published} partition(s), "
        f"{report.rows:,} rows, batches of {batch_size}, {CONCURRENCY} in flight, {checked}"
    )
    if result.status is not RunStatus.SUCCEEDED:
        raise OperationFailed(f"demo backfill {result.run_id} failed: see `tidegate show run`")
    return result.run_id
