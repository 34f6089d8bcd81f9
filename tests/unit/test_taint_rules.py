"""The pure rules of contamination: how far a taint reaches, what a recovery recomputes, and
how the rerun judgment weighs what consumers read. No engine, no ledger: lineage is given."""

from __future__ import annotations

from collections.abc import Sequence

from tidegate.domain.partitions import Grain
from tidegate.domain.recover import Step, plan_recovery
from tidegate.domain.rerun import Facts, Rules, Verdict, judge
from tidegate.domain.taint import Mark, Read, TaintedPartition, propagate

DAY = 86_400
# a toy lineage: days 0..9 of `daily`; `weekly` partition w reads days [7w, 7w + 7); `report`
# partition w reads weekly w; `side` reads daily days one by one, and nothing reads `side`
WEEKLY = [(w * 7 * DAY, (w + 1) * 7 * DAY) for w in range(2)]


def readers(model: str, upstream: str, windows: Sequence[tuple[int, int]]) -> list[Read]:
    def overlaps(start: int, end: int) -> bool:
        return any(start < e and end > s for s, e in windows)

    if (model, upstream) == ("weekly", "daily"):
        return [Read("weekly", s, e, f"w{s}", s, e) for s, e in WEEKLY if overlaps(s, e)]
    if (model, upstream) == ("report", "weekly"):
        return [Read("report", s, e, f"r{s}", s, e) for s, e in WEEKLY if overlaps(s, e)]
    if (model, upstream) == ("report", "daily"):
        # the report also reads the daily partitions directly: reached twice, marked once
        return [Read("report", s, e, f"r{s}", s, e) for s, e in WEEKLY if overlaps(s, e)]
    if (model, upstream) == ("side", "daily"):
        days = [(d * DAY, (d + 1) * DAY) for d in range(14)]
        return [Read("side", s, e, f"s{s}", s, e) for s, e in days if overlaps(s, e)]
    return []


def days(first: int, last: int) -> list[Mark]:
    return [Mark("daily", d * DAY, (d + 1) * DAY, f"d{d}", 0) for d in range(first, last + 1)]


ORDER = ["weekly", "side", "report"]
PARENTS = {"weekly": ["daily"], "side": ["daily"], "report": ["weekly", "daily"]}


def test_a_taint_reaches_every_reader_transitively_at_its_shallowest_depth() -> None:
    marks = propagate(days(5, 8), ORDER, PARENTS, readers)
    reached = {(m.model, m.start // DAY, m.depth) for m in marks}
    assert {r for r in reached if r[0] == "weekly"} == {("weekly", 0, 1), ("weekly", 7, 1)}
    assert {r for r in reached if r[0] == "side"} == {("side", d, 1) for d in range(5, 9)}
    # the report reads daily directly (depth 1) and through weekly (depth 2): depth 1 wins
    assert {r for r in reached if r[0] == "report"} == {("report", 0, 1), ("report", 7, 1)}
    [week] = [m for m in marks if m.model == "weekly" and m.start == 7 * DAY]
    assert (week.via_model, week.via_start) == ("daily", 7 * DAY)


def test_a_taint_inside_one_week_stays_out_of_the_other() -> None:
    marks = propagate(days(1, 2), ORDER, PARENTS, readers)
    assert {(m.model, m.start // DAY) for m in marks if m.model != "daily"} == {
        ("weekly", 0),
        ("side", 1),
        ("side", 2),
        ("report", 0),
    }
    assert propagate([], ORDER, PARENTS, readers) == []


def tainted(mark: Mark, taint_id: str = "t1") -> TaintedPartition:
    return TaintedPartition(taint_id, mark, "dup load", "daily", "2025-01-01")


def test_recovery_takes_downstream_marks_only_once_all_their_tainted_input_is_recomputed() -> None:
    origin_all = [tainted(m) for m in days(5, 8)]
    weekly = [tainted(Mark("weekly", s, e, f"w{s}", 1)) for s, e in WEEKLY]

    def open_marks(model: str, start: int, end: int) -> list[TaintedPartition]:
        found = {"daily": origin_all, "weekly": weekly}.get(model, [])
        return [t for t in found if t.mark.start < end and t.mark.end > start]

    def reads(mark: Mark) -> list[tuple[str, int, int]]:
        return [("daily", mark.start, mark.end)]

    step = Step("weekly", "v-weekly", Grain.DAY, weekly)
    # recovering days 5 and 6 only: week 0 read nothing else tainted, week 1 also reads 7 and 8
    recovery = plan_recovery(
        "daily", "5..6", origin_all[:2], [step], "v-daily", Grain.DAY, 7, 1, reads, open_marks
    )
    assert [(s.model, s.selection) for s in recovery.plan.steps] == [
        ("daily", ((5 * DAY, 7 * DAY),)),
        ("weekly", (WEEKLY[0],)),
    ]
    assert [t.mark.start for t in recovery.left] == [7 * DAY]
    # every tainted day: both weeks
    whole = plan_recovery(
        "daily", "all", origin_all, [step], "v-daily", Grain.DAY, 7, 1, reads, open_marks
    )
    assert [s.selection for s in whole.plan.steps][1] == ((0, 14 * DAY),)  # merged
    assert whole.left == ()
    # another taint's marks downstream are not this recovery's
    other = Step("weekly", "v-weekly", Grain.DAY, [tainted(weekly[0].mark, "t2")])
    alone = plan_recovery(
        "daily", "all", origin_all, [other], "v-daily", Grain.DAY, 7, 1, reads, open_marks
    )
    assert [s.model for s in alone.plan.steps] == ["daily"]


def facts(read_by: tuple[str, ...] = (), taint: str | None = None) -> Facts:
    return Facts(
        label="2025-01-03",
        start=0,
        end=DAY,
        selected=True,
        state="published",
        writer_version="v1",
        writer_run="run-1",
        published_at="2025-01-04T00:00:00+00:00",
        locked_by=None,
        read_by=read_by,
        taint=taint,
    )


def test_replacing_what_a_consumer_read_needs_approval_unless_config_allows_it() -> None:
    rules = Rules("v1", "overwrite", (), max_partitions=31)
    [read] = judge([facts(("finance", "monthly 2025-01"))], rules)
    assert read.verdict is Verdict.NEEDS_APPROVAL
    assert "already read by finance, monthly 2025-01" in read.reason
    [unread] = judge([facts()], rules)
    assert unread.verdict is Verdict.SAFE
    allowed = Rules("v1", "overwrite", (), max_partitions=31, approve_consumed=False)
    [fixing] = judge([facts(("finance",), taint="dup load")], allowed)
    assert fixing.verdict is Verdict.SAFE and "clears its taint (dup load)" in fixing.reason


def test_a_rerun_of_a_merge_model_says_it_keeps_the_taint() -> None:
    rules = Rules("v1", "merge", ("order_id",), max_partitions=31, approve_consumed=False)
    [judged] = judge([facts(taint="dup load")], rules)
    assert judged.verdict is Verdict.SAFE
    assert "keeps its taint (dup load)" in judged.reason and "recover" in judged.reason


def test_lineage_rows_are_kept_when_their_read_window_overlaps_a_window() -> None:
    from tidegate.domain.taint import reads_in

    rows = [
        (0, DAY, "a0", 0, DAY),  # reads day 0
        (DAY, 2 * DAY, "a1", DAY, 2 * DAY),  # day 1
        (0, 7 * DAY, "w0", 0, 7 * DAY),  # a week
        (5 * DAY, 6 * DAY, "a5", 5 * DAY, 6 * DAY),  # day 5
        (5 * DAY, 6 * DAY, "a5", 5 * DAY, 6 * DAY),  # the same partition read twice
    ]
    windows = [(DAY, 2 * DAY), (3 * DAY, 4 * DAY), (5 * DAY, 6 * DAY)]
    found = reads_in("m", rows, windows)
    assert [(r.start, r.attempt_id) for r in found] == [(0, "w0"), (DAY, "a1"), (5 * DAY, "a5")]
    assert reads_in("m", rows, [(2 * DAY, 3 * DAY)]) == [Read("m", 0, 7 * DAY, "w0", 0, 7 * DAY)]
    assert reads_in("m", rows, []) == []
