"""Restore: publish again what an earlier run (or attempt) published into a range of a model,
from the data files its publish wrote and the warehouse still keeps — no recomputation. It is
a rerun in every other way: judged first (approval where the partition's current writer is
another version or downstream models read it), published through stage → audit → publish as
a new attempt, downstream marked stale where the rows change, notices sent; and it proves each
partition's checksum equals the earlier attempt's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from tidegate.domain.attempt import AttemptState
from tidegate.domain.errors import UsageError
from tidegate.domain.ids import looks_like_run_id
from tidegate.domain.partitions import PartitionRange
from tidegate.domain.run import Attempt
from tidegate.engines.factory import open_iceberg_tables
from tidegate.ops.context import Context
from tidegate.ops.rerun import Plan, _plan

NEEDS_ICEBERG = (
    "restore republishes earlier data files, which only Iceberg tables keep: "
    '[warehouse] tables = "iceberg"'
)


@dataclass(frozen=True)
class Restoration:
    plan: Plan
    # partition start → the attempt whose rows come back
    origins: dict[int, Attempt]

    def document(self) -> list[dict[str, object]]:
        spec = self.plan.version.spec
        return [
            {
                "partition": spec.span(start, origin.partition_end).label(spec.keys),
                "attempt_id": origin.attempt_id,
                "run_id": origin.run_id,
                "checksum": origin.checksum,
            }
            for start, origin in sorted(self.origins.items())
        ]


def judge_restore(ctx: Context, model: str, partitions: str, to: str) -> Restoration:
    """What restoring `partitions` of `model` to run or attempt `to` would publish, judged as
    a rerun of them with the version that wrote the earlier rows."""
    if ctx.project.settings.warehouse.tables != "iceberg":
        raise UsageError(NEEDS_ICEBERG)
    spec = ctx.project.model(model)
    chosen = {k.start: k for k in spec.parse_range(partitions)}
    published = [
        a
        for a in _attempts(ctx, to)
        if a.model == model and a.state is AttemptState.PUBLISHED and a.partition_start in chosen
    ]
    origins = {a.partition_start: a for a in sorted(published, key=lambda a: a.attempt_id)}
    missing = sorted(set(chosen) - set(origins))
    if missing:
        label = chosen[missing[0]].label(spec.keys)
        raise UsageError(
            f"{to} published no {model} {label}"
            + (f" (and {len(missing) - 1} more of the range)" if len(missing) > 1 else "")
            + "; `tidegate show partition "
            + f"{model} {label}` lists what published it"
        )
    versions = sorted({a.version_id for a in origins.values()})
    if len(versions) > 1:
        raise UsageError(
            f"{to} published {model} with {len(versions)} versions ({', '.join(versions)}); "
            "restore the partitions of each version on its own"
        )
    _refuse_expired(ctx, model, spec.span, origins)
    version = ctx.state.get_version(versions[0])
    if version is None:
        raise UsageError(f"version {versions[0]} of {model} is not in the ledger")
    label = spec.span(min(chosen), max(k.end for k in chosen.values())).label(spec.keys)
    # The version's checks run on the restored rows again; its reconciliations do not: they
    # compare rows with inputs, and these rows are proven the earlier attempt's, which
    # reconciled with the inputs it read — the inputs the restored attempt records. Inputs
    # that changed since show the partition stale, as for any partition.
    checked = replace(version, spec=replace(version.spec, reconciliations=()))
    plan = _plan(ctx, None, model, checked, chosen, lambda *_: True, label)
    return Restoration(plan, origins)


def _refuse_expired(
    ctx: Context,
    model: str,
    span: Callable[[int, int], PartitionRange],
    origins: Mapping[int, Attempt],
) -> None:
    """Every earlier attempt's snapshot is still in main's history (not expired)."""
    tables = open_iceberg_tables(ctx.project)
    try:
        gone = [a for a in origins.values() if tables.published_in(model, a.attempt_id) is None]
    finally:
        tables.close()
    if gone:
        first = gone[0]
        label = span(first.partition_start, first.partition_end).label(
            ctx.project.model(model).keys
        )
        raise UsageError(
            f"{model} {label}: main's history holds no snapshot of attempt {first.attempt_id} "
            "any more (`tidegate maintain` expired it, or the table changed behind tidegate's "
            f"back); `tidegate rerun {model} --partitions {label}` recomputes it"
        )


def _attempts(ctx: Context, to: str) -> list[Attempt]:
    if looks_like_run_id(to):
        if ctx.state.get_run(to) is None:
            raise UsageError(f"no run {to}")
        return ctx.state.attempts_of_run(to)
    if not to.startswith("att-"):
        raise UsageError(f"--to takes a run (run-…) or an attempt (att-…), not {to!r}")
    attempt = ctx.state.get_attempt(to)
    if attempt is None:
        raise UsageError(f"no attempt {to}")
    return [attempt]
