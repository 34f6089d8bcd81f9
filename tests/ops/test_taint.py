"""Taint, recover and ack: contamination reaches exactly what read it, recovery fixes exactly
that (upstream first), and the consumers are told — through an endpoint that is down at first."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.kit import (
    FORCED,
    Hook,
    cli_events,
    run_process,
    spawn,
    state_dump,
    tidegate,
    warehouse_dump,
    warehouse_execute,
    warehouse_rows,
)
from tests.ops.test_write_modes import MODEL as BOOK
from tests.ops.test_write_modes import model_file as book_model

WEEK = "2025-06-28..2025-07-04"
WEEK_DAYS = [str(date(2025, 6, 28) + timedelta(days=n)) for n in range(7)]
MONTHS = ("2025-05", "2025-06", "2025-07", "2025-08")


def cli(project: Path, *args: str, code: int = 0) -> Any:
    result = tidegate(*args, "--project", project)
    assert result.exit_code == code, (args, result.stdout[-1500:], result.stderr)
    return result


def doc(project: Path, *args: str, code: int = 0) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(cli(project, *args, "--json", code=code).stdout)
    return document


def published(project: Path) -> None:
    """Four months of every model: May to August."""
    days = ("--partitions", "2025-05-01..2025-08-31", "--batch-size", "31")
    cli(project, "backfill", "daily_revenue", *days)
    for model in ("monthly_revenue", "revenue_report"):
        cli(project, "backfill", model, "--partitions", "2025-05..2025-08")


def register(project: Path, url: str, model: str, ack: str = "notified") -> None:
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text()
        + f'\n[[notify]]\nname = "finance_hook"\nkind = "http"\nurl = "{url}"\n'
        + "retry_base_seconds = 0.001\nretry_max_seconds = 0.001\n"
        + f'\n[[consumers]]\nname = "finance"\nmodel = "{model}"\nnotify = "finance_hook"\n'
        + f'ack = "{ack}"\n'
    )


def killed_recovery(project: Path, crash_at: str) -> str:
    """Recover daily_revenue one partition a batch in a real process killed at `crash_at`; the
    recovery's run id, from the ledger."""
    killed = run_process(
        "recover",
        "daily_revenue",
        "--batch-size",
        "1",
        "--project",
        project,
        env={"TIDEGATE_CRASH_AT": crash_at},
    )
    assert killed.exit_code == -9, killed.stderr
    with sqlite3.connect(project / ".tidegate" / "state.db") as con:
        [(run_id,)] = con.execute("SELECT run_id FROM runs WHERE kind = 'recover'").fetchall()
    return str(run_id)


def taints_of(project: Path, model: str, partition: str) -> list[dict[str, Any]]:
    shown: list[dict[str, Any]] = doc(project, "show", "partition", model, partition)["taints"]
    return shown


def tainted(project: Path) -> dict[str, int]:
    return {m["model"]: m["partitions"]["tainted"] for m in doc(project, "status")["models"]}


def checksums(project: Path, model: str, partitions: list[str]) -> dict[str, tuple[str, str]]:
    """(checksum, attempt) of what is published in each partition."""
    found = {}
    for label in partitions:
        part = doc(project, "show", "partition", model, label)["published"]
        found[label] = (part["checksum"], part["attempt_id"])
    return found


def test_a_taint_reaches_exactly_the_partitions_that_read_it_two_levels_deep(
    project: Path,
) -> None:
    published(project)
    marked = doc(project, "taint", "daily_revenue", "--partitions", WEEK, "--reason", "dup load")
    # expected, from the calendar alone: the week's days, the months they fall in, and the
    # report months built from those
    months = sorted({day[:7] for day in WEEK_DAYS})
    assert months == ["2025-06", "2025-07"]
    assert [(t["model"], t["depth"], t["partitions"], t["count"]) for t in marked["tainted"]] == [
        ("daily_revenue", 0, [WEEK], 7),
        ("monthly_revenue", 1, ["2025-06..2025-07"], 2),
        ("revenue_report", 2, ["2025-06..2025-07"], 2),
    ]
    assert tainted(project) == {"daily_revenue": 7, "monthly_revenue": 2, "revenue_report": 2}
    for month in MONTHS:
        expected = 1 if month in months else 0
        assert len(taints_of(project, "monthly_revenue", month)) == expected, month
        assert len(taints_of(project, "revenue_report", month)) == expected, month
    for day in ("2025-06-27", "2025-07-05"):
        assert taints_of(project, "daily_revenue", day) == []
    [report] = taints_of(project, "revenue_report", "2025-07")
    assert (report["origin"], report["depth"], report["reason"]) == ("daily_revenue", 2, "dup load")
    assert report["via"] == "monthly_revenue 2025-07"
    [day] = taints_of(project, "daily_revenue", "2025-07-01")
    assert day["via"] is None and day["taint_id"] == marked["taint_id"]


def test_recover_fixes_every_tainted_partition_upstream_first_and_tells_the_consumer(
    project: Path, hook: Hook
) -> None:
    published(project)
    register(project, hook.url, "revenue_report")
    months = ["2025-06", "2025-07"]
    before = {
        "daily": checksums(project, "daily_revenue", WEEK_DAYS),
        "report": checksums(project, "revenue_report", months),
    }
    marked = doc(project, "taint", "daily_revenue", "--partitions", WEEK, "--reason", "dup load")
    assert marked["consumers_notified"] == ["finance"]
    assert any("kept in the outbox" in note for note in marked["notes"])  # the hook is down

    planned = doc(project, "recover", "daily_revenue", "--dry-run")
    assert [(s["model"], s["ranges"]) for s in planned["steps"]] == [
        ("daily_revenue", [WEEK]),
        ("monthly_revenue", ["2025-06..2025-07"]),
        ("revenue_report", ["2025-06..2025-07"]),
    ]
    assert tainted(project)["revenue_report"] == 2  # a dry run writes nothing

    result = cli_events(project, "recover", "daily_revenue", "--json")
    events = result.events
    assert result.json()["run_id"] == events[-1]["run_id"]
    order = [(e["model"], e["partition"]) for e in events if e["event"] == "partition"]
    assert [m for m, _ in order] == ["daily_revenue"] * 7 + ["monthly_revenue"] * 2 + [
        "revenue_report"
    ] * 2
    assert {e["state"] for e in events if e["event"] == "partition"} == {"published"}
    run_id = events[-1]["run_id"]
    assert events[-1]["status"] == "succeeded"
    assert tainted(project) == {"daily_revenue": 0, "monthly_revenue": 0, "revenue_report": 0}

    after = {
        "daily": checksums(project, "daily_revenue", WEEK_DAYS),
        "report": checksums(project, "revenue_report", months),
    }
    for side in ("daily", "report"):
        for label, (checksum, attempt) in after[side].items():
            # recomputed by the recovery (a new attempt) from unchanged sources: same content
            assert attempt != before[side][label][1], label
            assert checksum == before[side][label][0], label
    shown = doc(project, "show", "run", run_id)
    assert shown["kind"] == "recover" and shown["plan"]["taint_ids"] == [marked["taint_id"]]
    assert {a["taint"] for a in shown["attempts"]} == {None}

    # the endpoint comes up: the taint notice, then the re-read notice, each with exactly the
    # consumer's partitions of revenue_report
    assert hook.received == []
    hook.up.set()
    delivered = doc(project, "deliver", "--as-of", "2099-01-01T00:00:00Z")
    assert delivered["kept"] == []
    notices = [(n["kind"], n["model"], n["partitions"]) for n in hook.received]
    assert notices[0] == ("taint", "revenue_report", ["2025-06..2025-07"])
    assert ("reread", "revenue_report", ["2025-06..2025-07"]) in notices
    assert notices.index(("reread", "revenue_report", ["2025-06..2025-07"])) > 0
    assert hook.received[0]["reason"] == "dup load"


def test_downstream_runs_skip_tainted_input_or_carry_the_taint_when_told_to_warn(
    project: Path,
) -> None:
    published(project)
    cli(project, "taint", "daily_revenue", "--partitions", "2025-06-03", "--reason", "dup load")
    blocked = doc(project, "run", "monthly_revenue", "--partition", "2025-06", code=1)
    [partition] = blocked["partitions"]
    assert partition["state"] == "skipped"
    assert "upstream tainted: daily_revenue 2025-06-03 (dup load)" in partition["reason"]
    assert "tidegate recover daily_revenue" in partition["reason"]

    config = project / "tidegate.toml"
    config.write_text(config.read_text() + '\n[taint]\ndownstream = "warn"\n')
    warned = doc(project, "run", "monthly_revenue", "--partition", "2025-06")
    assert warned["partitions"][0]["state"] == "published"
    assert any("published from tainted input" in n for n in warned["notes"])
    [mark] = taints_of(project, "monthly_revenue", "2025-06")
    assert (mark["depth"], mark["via"]) == (1, "daily_revenue 2025-06-03")
    # the earlier mark on the attempt it replaced is cleared: one open mark, not two
    assert tainted(project)["monthly_revenue"] == 1


def test_the_rerun_judgment_counts_what_consumers_and_downstream_models_read(
    project: Path, tmp_path: Path
) -> None:
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text()
        + '\n[[notify]]\nname = "finance_file"\nkind = "file"\npath = "notices.jsonl"\n'
        + '\n[[consumers]]\nname = "finance"\nmodel = "daily_revenue"\nnotify = "finance_file"\n'
        + '\n[[consumers]]\nname = "audit"\nmodel = "daily_revenue"\nnotify = "finance_file"\n'
        + 'ack = "explicit"\n'
    )
    published(project)
    run_id = doc(project, "status", "daily_revenue")["models"][0]["last_run"]["run_id"]
    one = ("--partitions", "2025-06-03", "--dry-run")
    [judged] = doc(project, "rerun", run_id, *one)["judgment"]
    # finance was told (a delivered notice); audit acknowledges explicitly and has not yet
    assert judged["read_by"] == ["finance", "monthly_revenue 2025-06"]
    assert judged["verdict"] == "needs approval"
    assert "already read by finance, monthly_revenue 2025-06" in judged["reason"]

    cli(project, "ack", "audit", "daily_revenue", "--partitions", "2025-06-01..2025-06-05")
    [judged] = doc(project, "rerun", run_id, *one)["judgment"]
    assert judged["read_by"] == ["audit", "finance", "monthly_revenue 2025-06"]
    refused = cli(project, "rerun", run_id, "--partitions", "2025-06-03", code=3)
    assert "need approval" in refused.stderr

    cli(project, "taint", "daily_revenue", "--partitions", "2025-06-03", "--reason", "dup load")
    config.write_text(config.read_text() + "\n[rerun]\napprove_consumed = false\n")
    [judged] = doc(project, "rerun", run_id, *one)["judgment"]
    assert (judged["verdict"], judged["taint"]) == ("safe", "dup load")
    assert "clears its taint (dup load)" in judged["reason"]
    done = doc(project, "rerun", run_id, "--partitions", "2025-06-03")
    assert done["status"] == "succeeded"
    assert taints_of(project, "daily_revenue", "2025-06-03") == []
    # rerunning the day clears its own mark; the month built from it is still to recompute
    assert tainted(project) == {"daily_revenue": 0, "monthly_revenue": 1, "revenue_report": 1}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("taint", "daily_revenue", "--partitions", "2025-06-05..2025-06-01", "--reason", "x"),
            "ends before it starts",
        ),
        (("taint", "nope", "--partitions", "2025-06-01", "--reason", "x"), "unknown model"),
        (("taint", "daily_revenue", "--partitions", "2025-06-01", "--reason", " "), "--reason"),
        (
            ("taint", "daily_revenue", "--partitions", "2024-01-01", "--reason", "x"),
            "nothing to taint",
        ),
        (
            (
                "taint",
                "daily_revenue",
                "--partitions",
                "2025-06-01'; DROP TABLE x; --",
                "--reason",
                "x",
            ),
            "is not a day partition",
        ),
        (
            ("ack", "finance", "daily_revenue", "--partitions", "2025-06-01"),
            "not a registered consumer",
        ),
        (("recover", "daily_revenue"), "nothing to recover"),
        (("recover", "resume", "run-20250101T000000000000Z-abcdef"), "no recover run-"),
        (("recover",), "needs a MODEL"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    project: Path, args: tuple[str, ...], message: str
) -> None:
    cli(project, "run", "daily_revenue", "--partition", "2025-06-01..2025-06-02")
    ledger, warehouse = state_dump(project), warehouse_dump(project)
    result = cli(project, *args, code=2)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert state_dump(project) == ledger and warehouse_dump(project) == warehouse


def test_a_reviewed_recovery_plan_file_is_kept_by_its_hash(project: Path, tmp_path: Path) -> None:
    published(project)
    cli(project, "taint", "daily_revenue", "--partitions", WEEK, "--reason", "dup load")
    plan = tmp_path / "recover.toml"
    plan.write_text('model = "daily_revenue"\npartitions = "2025-06-28..2025-06-30"\n')
    planned = doc(project, "recover", "--file", str(plan), "--dry-run")
    # June read only the recovered days; July also reads days this plan does not recompute
    assert [(s["model"], s["ranges"]) for s in planned["steps"]] == [
        ("daily_revenue", ["2025-06-28..2025-06-30"]),
        ("monthly_revenue", ["2025-06"]),
        ("revenue_report", ["2025-06"]),
    ]
    assert planned["notes"] == [
        "monthly_revenue 2025-07 stays tainted: it also reads tainted partitions outside this "
        "recovery",
        "revenue_report 2025-07 stays tainted: it also reads tainted partitions outside this "
        "recovery",
    ]
    result = cli(project, "recover", "--file", str(plan), "--json")
    end = result.json()
    assert end["status"] == "succeeded" and end["notes"][:2] == planned["notes"]
    shown = doc(project, "show", "run", end["run_id"])
    assert shown["plan_hash"] == hashlib.sha256(plan.read_bytes()).hexdigest()
    assert shown["plan"]["requested"] == "2025-06-28..2025-06-30"
    assert tainted(project) == {"daily_revenue": 4, "monthly_revenue": 1, "revenue_report": 1}
    plan.write_text('model = "daily_revenue"\nrange = "2025-07-01"\n')
    assert "unknown key 'range'" in cli(project, "recover", "--file", str(plan), code=2).stderr


@pytest.mark.crash
def test_a_recovery_killed_mid_way_resumes_to_the_same_result(project: Path) -> None:
    published(project)
    before = warehouse_dump(project)
    cli(project, "taint", "daily_revenue", "--partitions", WEEK, "--reason", "dup load")
    # one partition per batch: killed right after the third publish, before its ledger update
    run_id = killed_recovery(project, "after_publish:3")
    assert tainted(project)["daily_revenue"] > 0
    resumed = spawn("recover", "resume", run_id, "--project", project)
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert tainted(project) == {"daily_revenue": 0, "monthly_revenue": 0, "revenue_report": 0}
    after = warehouse_dump(project)
    # the same rows as before the taint (the sources did not change): nothing lost or doubled
    assert {k: v for k, v in after.items() if not k.startswith("_")} == {
        k: v for k, v in before.items() if not k.startswith("_")
    }
    assert doc(project, "show", "run", run_id)["status"] == "succeeded"


def test_resuming_a_recovery_that_succeeded_is_a_no_op(project: Path) -> None:
    published(project)
    cli(project, "taint", "daily_revenue", "--partitions", "2025-06-28", "--reason", "dup load")
    end = cli(project, "recover", "daily_revenue", "--json").json()
    run_id = end["run_id"]
    ended_at = doc(project, "show", "run", run_id)["ended_at"]
    again = cli(project, "recover", "resume", run_id)
    assert again.stdout.strip() == f"nothing to resume: {run_id} succeeded at {ended_at}"
    resumed = cli_events(project, "recover", "resume", run_id, "--json")
    [noop] = resumed.events
    assert (noop["event"], noop["status"], noop["nothing_to_resume"]) == ("end", "succeeded", True)
    result = resumed.json()  # stdout: the one result document, the same result
    assert (result["schema"], result["status"], result["nothing_to_resume"]) == (
        "tidegate.backfill-result/v1",
        "succeeded",
        True,
    )


# -- merge and append: only a rebuild clears a taint ------------------------------------------

BOGUS_DAY = "2025-01-02"


def corrupt(project: Path, day: str) -> None:
    """A bad load: one more order on `day`, with a status no real order has."""
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        con.execute(
            "INSERT INTO orders BY NAME SELECT * REPLACE (order_id + 10000000 AS order_id, "
            "'bogus' AS status) FROM orders WHERE CAST(order_ts AS DATE) = ? "
            "ORDER BY order_id LIMIT 1",
            [date.fromisoformat(day)],
        )
    finally:
        con.close()


def repair(project: Path) -> None:
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        con.execute("DELETE FROM orders WHERE status = 'bogus'")
    finally:
        con.close()


def statuses(project: Path, model: str) -> list[str]:
    rows = warehouse_rows(
        project,
        f"SELECT DISTINCT status FROM {model} WHERE CAST(order_ts AS DATE) = ? ORDER BY 1",
        [date.fromisoformat(BOGUS_DAY)],
    )
    return [r[0] for r in rows]


@pytest.mark.parametrize(
    "write_mode",
    [("merge", '["order_id"]'), ("append", '["order_id"]'), ("append", "")],
    ids=["merge", "append with a key", "append without a key"],
)
def test_recover_rebuilds_a_merge_or_append_partition_a_rerun_only_adds_to(
    project: Path, write_mode: tuple[str, str]
) -> None:
    mode, key = write_mode
    (project / "models" / f"{BOOK}.sql").write_text(book_model(mode, key))
    cli(project, "build")
    cli(project, "deploy", BOOK, *FORCED)
    corrupt(project, BOGUS_DAY)
    cli(project, "run", BOOK, "--partition", BOGUS_DAY)
    assert "bogus" in statuses(project, BOOK)
    cli(project, "taint", BOOK, "--partitions", BOGUS_DAY, "--reason", "bogus orders")
    repair(project)
    if key:
        # a merge or a keyed append keeps the bogus row: publishing again keeps the taint
        cli(project, "run", BOOK, "--partition", BOGUS_DAY)
        assert "bogus" in statuses(project, BOOK)
        assert len(taints_of(project, BOOK, BOGUS_DAY)) == 1
    recovered = cli(project, "recover", BOOK, "--json").json()
    assert recovered["status"] == "succeeded"
    assert "bogus" not in statuses(project, BOOK) and taints_of(project, BOOK, BOGUS_DAY) == []
    source = warehouse_rows(
        project,
        "SELECT order_id FROM orders WHERE CAST(order_ts AS DATE) = ? ORDER BY 1",
        [date.fromisoformat(BOGUS_DAY)],
    )
    rebuilt = warehouse_rows(
        project,
        f"SELECT order_id FROM {BOOK} WHERE CAST(order_ts AS DATE) = ? ORDER BY 1",
        [date.fromisoformat(BOGUS_DAY)],
    )
    assert rebuilt == source  # exactly once: nothing lost, nothing doubled


def test_a_refused_resume_writes_nothing_and_a_resume_tells_what_a_crash_left_untold(
    project: Path, tmp_path: Path
) -> None:
    published(project)
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text()
        + '\n[[notify]]\nname = "log"\nkind = "file"\npath = "notices.jsonl"\n'
        + '\n[[consumers]]\nname = "finance"\nmodel = "daily_revenue"\nnotify = "log"\n'
    )
    cli(
        project, "taint", "daily_revenue", "--partitions", "2025-06-10..2025-06-11", "--reason", "x"
    )
    run_id = killed_recovery(project, "after_ledger:1")
    cli(project, "pause", "monthly_revenue")
    ledger = state_dump(project)
    refused = cli(project, "recover", "resume", run_id, code=3)
    assert "monthly_revenue is paused" in refused.stderr
    assert {k: v for k, v in state_dump(project).items() if k != "runs"} == {
        k: v for k, v in ledger.items() if k != "runs"
    }
    assert doc(project, "show", "run", run_id)["status"] != "running"
    cli(project, "unpause", "monthly_revenue")
    cli(project, "recover", "resume", run_id)
    told = [json.loads(line) for line in (project / "notices.jsonl").read_text().splitlines()]
    rereads = [n["partitions"] for n in told if n["kind"] == "reread"]
    # the killed execution told nobody; the resume tells everything the run recomputed, the
    # day the killed one published included (notices are at least once: never lost)
    assert rereads == [["2025-06-10..2025-06-11"]]


STATUS_TOTALS = """/* tidegate
grain = "key"
key_column = "status"
keys = ["completed", "cancelled"]

[columns]
status = "VARCHAR NOT NULL"
gross_revenue = "DECIMAL(38, 2)"
*/
SELECT status, CAST(sum(gross_revenue) AS DECIMAL(38, 2)) AS gross_revenue
FROM daily_revenue WHERE status = $key GROUP BY status
"""


def test_a_recovery_is_refused_up_front_while_a_source_drifted(project: Path) -> None:
    """A source column renamed under the recovered models: the recovery, its dry run and the
    resume of a recovery cut short are refused before they start (exit 3, nothing written);
    with the column back, the resume finishes and nothing stays tainted."""
    published(project)
    cli(project, "taint", "daily_revenue", "--partitions", WEEK, "--reason", "dup load")
    rename = "ALTER TABLE orders RENAME COLUMN refund TO refunds"
    restore = "ALTER TABLE orders RENAME COLUMN refunds TO refund"
    warehouse_execute(project, rename)
    ledger, warehouse = state_dump(project), warehouse_dump(project)
    for args in (("recover", "daily_revenue"), ("recover", "daily_revenue", "--dry-run")):
        [line] = cli(project, *args, code=3).stderr.splitlines()
        assert "cannot run against the warehouse as it is now, nothing started" in line, line
        assert "refund" in line, line
        assert state_dump(project) == ledger and warehouse_dump(project) == warehouse, args
    warehouse_execute(project, restore)
    run_id = killed_recovery(project, "after_publish:3")
    warehouse_execute(project, rename)
    [line] = cli(project, "recover", "resume", run_id, code=3).stderr.splitlines()
    assert "daily_revenue v1 cannot run against the warehouse as it is now" in line, line
    warehouse_execute(project, restore)
    cli(project, "recover", "resume", run_id)
    assert set(tainted(project).values()) == {0}


def test_a_key_list_model_reading_a_daily_model_is_reached_and_blocked(project: Path) -> None:
    """A key partition reads everything its upstream published, so its lineage is all of it."""
    published(project)
    (project / "models" / "status_totals.sql").write_text(STATUS_TOTALS)
    cli(project, "build")
    cli(project, "deploy", "status_totals")
    cli(project, "run", "status_totals", "--partition", "completed")
    read = doc(project, "show", "partition", "status_totals", "completed")["published"]["inputs"]
    assert [(i["upstream"], i["range"]) for i in read] == [
        ("daily_revenue", "2025-05-01..2025-08-31")
    ]
    marked = doc(project, "taint", "daily_revenue", "--partitions", "2025-06-03", "--reason", "x")
    assert ("status_totals", 1, ["completed"]) in [
        (t["model"], t["depth"], t["partitions"]) for t in marked["tainted"]
    ]
    blocked = doc(project, "run", "status_totals", "--partition", "cancelled", code=1)
    assert "upstream tainted: daily_revenue 2025-06-03" in blocked["partitions"][0]["reason"]
