"""Recovery plans: the tainted partitions to recompute, model by model in dependency order.

A recovery starts from the open marks of one model (in a range) and takes with it every open
mark of the same taints downstream: upstream first, then each model that read it. Each step is
a backfill plan of the model's active version over its marked partitions, recorded with the run
so `resume` continues exactly that plan.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tidegate.domain.backfill import BackfillPlan, StopLoss
from tidegate.domain.partitions import Grain, IntervalSet
from tidegate.domain.taint import Mark, TaintedPartition


@dataclass(frozen=True)
class RecoverPlan:
    model: str
    requested: str  # the range asked for, or "tainted": every tainted partition
    taint_ids: tuple[str, ...]
    steps: tuple[BackfillPlan, ...]

    @property
    def partitions(self) -> int:
        return sum(step.partitions for step in self.steps)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(step.model for step in self.steps)

    def to_json(self) -> str:
        return json.dumps(
            {
                "model": self.model,
                "requested": self.requested,
                "taint_ids": list(self.taint_ids),
                "steps": [json.loads(step.to_json()) for step in self.steps],
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(text: str) -> RecoverPlan:
        data: dict[str, Any] = json.loads(text)
        return RecoverPlan(
            model=data["model"],
            requested=data["requested"],
            taint_ids=tuple(data["taint_ids"]),
            steps=tuple(BackfillPlan.from_json(json.dumps(s)) for s in data["steps"]),
        )


@dataclass(frozen=True)
class Step:
    """What to recompute of one model: its marks and the version to write them with."""

    model: str
    version_id: str
    grain: Grain
    marks: Sequence[TaintedPartition]


Reads = Callable[[Mark], Sequence[tuple[str, int, int]]]
"""The windows of upstream models a marked partition's attempt read: (model, start, end)."""
OpenMarks = Callable[[str, int, int], Sequence[TaintedPartition]]
"""Open marks of a model overlapping [start, end)."""


@dataclass(frozen=True)
class Recovery:
    plan: RecoverPlan
    # downstream marks of the same taints left for later: they also read tainted partitions
    # this recovery does not recompute, so recomputing them now would only be blocked
    left: tuple[TaintedPartition, ...]


def plan_recovery(
    model: str,
    requested: str,
    origin: Sequence[TaintedPartition],
    downstream: Sequence[Step],
    version_id: str,
    grain: Grain,
    batch_size: int,
    max_concurrency: int,
    reads: Reads,
    open_marks: OpenMarks,
) -> Recovery:
    """The plan that recomputes `origin` (open marks of `model`), then, in `downstream` (models
    in dependency order, each with all its open marks), the marks of the same taints whose
    tainted input is all recomputed before them."""
    taint_ids = tuple(sorted({t.taint_id for t in origin}))
    fixed: dict[str, set[int]] = {model: {t.mark.start for t in origin}}
    steps = [Step(model, version_id, grain, origin)]
    left: list[TaintedPartition] = []
    for step in downstream:
        chosen: dict[int, TaintedPartition] = {}
        for marked in step.marks:
            if marked.taint_id not in taint_ids or marked.mark.start in chosen:
                continue
            clean = all(
                u.mark.start in fixed.get(upstream, set())
                for upstream, start, end in reads(marked.mark)
                for u in open_marks(upstream, start, end)
            )
            if clean:
                chosen[marked.mark.start] = marked
            else:
                left.append(marked)
        fixed[step.model] = set(chosen)
        steps.append(Step(step.model, step.version_id, step.grain, list(chosen.values())))
    plan = RecoverPlan(
        model=model,
        requested=requested,
        taint_ids=taint_ids,
        steps=tuple(
            BackfillPlan(
                model=step.model,
                version_id=step.version_id,
                grain=step.grain,
                selection=_windows(step.marks),
                batch_size=batch_size,
                max_concurrency=max_concurrency,
                stop_loss=StopLoss(),
                requested=requested,
            )
            for step in steps
            if step.marks
        ),
    )
    return Recovery(plan, tuple(left))


def _windows(marks: Sequence[TaintedPartition]) -> tuple[tuple[int, int], ...]:
    return IntervalSet.of([(t.mark.start, t.mark.end) for t in marks]).intervals
