"""The rerun judgment: what rerunning each partition would do, before anything is touched.

A rerun is a recovery strategy, not a reflex: per partition, the facts (its state, who wrote it
and when, whether the write is idempotent, whether something else holds it) lead to a verdict —
`untouched` (published, not selected), `safe`, `needs approval` or `refused` — with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum


class Verdict(str, Enum):
    UNTOUCHED = "untouched"
    SAFE = "safe"
    NEEDS_APPROVAL = "needs approval"
    REFUSED = "refused"


@dataclass(frozen=True)
class Facts:
    """What the ledger says of one partition of the rerun's scope."""

    label: str
    start: int
    end: int
    selected: bool  # chosen for rerun (failed, never started, or named with --partitions)
    state: str | None  # its latest attempt's state; None when never attempted
    writer_version: str | None  # the version that published it, if published
    writer_run: str | None
    published_at: str | None
    locked_by: str | None  # a run with a live attempt on it
    # who read what is published there now: registered consumers, and downstream model
    # partitions ("monthly_revenue 2025-06")
    read_by: tuple[str, ...] = ()
    taint: str | None = None  # the reason of an open taint on it


@dataclass(frozen=True)
class Rules:
    target_version: str  # the version the rerun executes
    write_mode: str
    unique_key: tuple[str, ...]
    max_partitions: int  # more partitions than this need an approval
    approve_consumed: bool = True  # replacing what a consumer read needs an approval


@dataclass(frozen=True)
class Judgment:
    facts: Facts
    verdict: Verdict
    reason: str

    @property
    def runs(self) -> bool:
        return self.verdict in (Verdict.SAFE, Verdict.NEEDS_APPROVAL)


def judge(scope: Sequence[Facts], rules: Rules) -> list[Judgment]:
    selected = [f for f in scope if f.selected]
    too_many = len(selected) > rules.max_partitions
    return [_judge_one(f, rules, too_many, len(selected)) for f in scope]


def _judge_one(facts: Facts, rules: Rules, too_many: bool, count: int) -> Judgment:
    if not facts.selected:
        written = f"published by {facts.writer_run} at {facts.published_at}"
        return Judgment(facts, Verdict.UNTOUCHED, f"{written}; kept as it is")
    if facts.locked_by is not None:
        return Judgment(
            facts, Verdict.REFUSED, f"run {facts.locked_by} is writing it now; never two writers"
        )
    if rules.write_mode == "append" and not rules.unique_key:
        return Judgment(
            facts, Verdict.REFUSED, "append without a unique key would duplicate its rows"
        )
    if facts.writer_version is not None and facts.writer_version != rules.target_version:
        return Judgment(
            facts,
            Verdict.NEEDS_APPROVAL,
            f"published by version {facts.writer_version}; rerunning with "
            f"{rules.target_version} replaces it with another version's output",
        )
    if facts.read_by and rules.approve_consumed:
        shown = ", ".join(facts.read_by[:3]) + (", …" if len(facts.read_by) > 3 else "")
        return Judgment(
            facts,
            Verdict.NEEDS_APPROVAL,
            f"already read by {shown}; rerunning changes what they read",
        )
    if too_many:
        return Judgment(
            facts,
            Verdict.NEEDS_APPROVAL,
            f"{count} partitions selected, more than the {rules.max_partitions} a rerun may "
            "touch without approval",
        )
    idempotent = {
        "overwrite": "overwrite replaces the partition whole, in one transaction",
        "merge": f"merge dedups by its unique key {', '.join(rules.unique_key)}",
        "append": f"append dedups by its unique key {', '.join(rules.unique_key)}",
        "update": "update sets each row of the key range to its expression in one transaction, "
        "audited in it, and changes only rows that differ",
    }[rules.write_mode]
    fixes = (
        ""
        if not facts.taint
        else f"; clears its taint ({facts.taint})"
        if rules.write_mode == "overwrite"
        else f"; keeps its taint ({facts.taint}): a {rules.write_mode} keeps the rows it is "
        "about, `tidegate recover` rebuilds the partition"
    )
    return Judgment(facts, Verdict.SAFE, f"{idempotent}: running it again is idempotent{fixes}")


def needs_approval(judgments: Sequence[Judgment]) -> list[Judgment]:
    return [j for j in judgments if j.verdict is Verdict.NEEDS_APPROVAL]
