"""What a Dagster run of one asset asks of tidegate (no Dagster import): the one command for the
partitions it targets.

A run's partition key range, one key or many, is one `tidegate backfill MODEL --partitions
FIRST..LAST`: a materialization recomputes those partitions with the active version, which is
what a backfill is, and a single-run backfill policy makes a Dagster range backfill one tidegate
backfill (batched, checkpointed, resumable, one run in the ledger). A whole-table model is
`backfill MODEL --partitions all`; a cursor model (or a time model without a start) is a
scheduler tick, `tidegate run MODEL`, which processes what is due.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tidegate.domain.model import ModelSpec
from tidegate.domain.partitions import WHOLE_LABEL, Grain
from tidegate.orchestration import Invocation


def span(first: str, last: str) -> str:
    """The tidegate range of Dagster's partition key range (keys are tidegate labels)."""
    return first if first == last else f"{first}..{last}"


def request(
    spec: ModelSpec,
    project: Path,
    keys: tuple[str, str] | None,
    options: Sequence[str] = (),
) -> Invocation:
    """The command for one run of `spec`'s asset over the partition key range `keys` (first,
    last), or over the asset when it is unpartitioned (`keys` None). `options` are further flags
    of `tidegate backfill` (e.g. `--batch-size 7`); a scheduler tick takes none."""
    if keys is not None:
        return Invocation("backfill", spec.name, span(*keys), project, tuple(options))
    if spec.grain is Grain.TABLE:
        return Invocation("backfill", spec.name, WHOLE_LABEL, project, tuple(options))
    return Invocation("run", spec.name, None, project)
