"""`tidegate rerun`: the judgment first, then exactly what it allows, then the proof."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tests.kit import FORCED, state_dump, tidegate, warehouse_dump, warehouse_execute

DAILY = Path("models") / "daily_revenue.sql"
RANGE = "2025-01-01..2025-01-05"


def cli(project: Path, *args: str, code: int = 0) -> Any:
    result = tidegate(*args, "--project", project)
    assert result.exit_code == code, (args, result.stdout[-1500:], result.stderr)
    return result


def doc(project: Path, *args: str, code: int = 0) -> dict[str, Any]:
    result = cli(project, *args, "--json", code=code)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def published(project: Path) -> dict[str, tuple[str, str]]:
    shown = doc(project, "status", "daily_revenue")  # to be sure the ledger is readable
    assert shown["models"][0]["model"] == "daily_revenue"
    rows = {}
    for day in ("2025-01-01", "2025-01-02", "2025-01-03", "2025-01-04", "2025-01-05"):
        part = doc(project, "show", "partition", "daily_revenue", day).get("published")
        if part:
            rows[day] = (part["checksum"], part["published_at"])
    return rows


def failed_third_day(project: Path) -> str:
    """Story 2: the run fails writing its third partition (a bad status in its source rows)."""
    warehouse_execute(
        project,
        "UPDATE orders SET status = 'lost' WHERE order_id = (SELECT min(order_id) FROM orders "
        "WHERE order_ts::DATE = DATE '2025-01-03')",
    )
    run = doc(project, "run", "daily_revenue", "--partition", RANGE, code=1)
    assert [p["state"] for p in run["partitions"]] == [
        "published",
        "published",
        "failed",
        "published",
        "published",
    ]
    warehouse_execute(project, "UPDATE orders SET status = 'completed' WHERE status = 'lost'")
    return str(run["run_id"])


def test_story_2_judges_then_reruns_only_the_failed_partition(project: Path) -> None:
    run_id = failed_third_day(project)
    before = published(project)
    ledger, warehouse = state_dump(project), warehouse_dump(project)

    judged = doc(project, "rerun", run_id, "--dry-run")
    assert [(j["partition"], j["verdict"]) for j in judged["judgment"]] == [
        ("2025-01-01", "untouched"),
        ("2025-01-02", "untouched"),
        ("2025-01-03", "safe"),
        ("2025-01-04", "untouched"),
        ("2025-01-05", "untouched"),
    ]
    assert judged["judgment"][0]["written_by_run"] == run_id
    assert "idempotent" in judged["judgment"][2]["reason"]
    # the judgment touched nothing
    assert (state_dump(project), warehouse_dump(project)) == (ledger, warehouse)

    done = doc(project, "rerun", run_id)
    assert done["status"] == "succeeded"
    assert [(o["partition"], o["state"]) for o in done["outcomes"]] == [("2025-01-03", "published")]
    after = published(project)
    for day in ("2025-01-01", "2025-01-02", "2025-01-04", "2025-01-05"):
        assert after[day] == before[day], day  # same checksum, same publish time
    assert "2025-01-03" in after and "2025-01-03" not in before
    shown = doc(project, "show", "run", done["run_id"])
    assert shown["kind"] == "rerun" and shown["plan"]["rerun_of"] == run_id


def test_rerunning_a_range_twice_proves_the_same_checksums(project: Path) -> None:
    cli(project, "run", "daily_revenue", "--partition", RANGE)
    run_id = doc(project, "status", "daily_revenue")["models"][0]["last_run"]["run_id"]
    for _ in range(2):
        again = doc(project, "rerun", run_id, "--partitions", RANGE)
        assert [p["deterministic"] for p in again["proofs"]] == [True] * 5
        assert all(p["before"] == p["after"] for p in again["proofs"])


def test_a_non_deterministic_model_is_caught(project: Path) -> None:
    edit = (project / DAILY).read_text()
    (project / DAILY).write_text(
        edit.replace(
            'net_revenue = "DECIMAL(18, 2) NOT NULL"\n',
            'net_revenue = "DECIMAL(18, 2) NOT NULL"\nnoise = "BIGINT"\n',
        ).replace(
            "AS net_revenue\n", "AS net_revenue,\n    CAST(random() * 1e9 AS BIGINT) AS noise\n"
        )
    )
    cli(project, "build")
    cli(project, "deploy", "daily_revenue", *FORCED)
    cli(project, "run", "daily_revenue", "--partition", "2025-01-01..2025-01-02")
    run_id = doc(project, "status", "daily_revenue")["models"][0]["last_run"]["run_id"]
    again = doc(project, "rerun", run_id, "--partitions", "2025-01-01..2025-01-02", code=1)
    assert again["status"] == "failed" and "not deterministic" in again["reason"]
    assert [p["deterministic"] for p in again["proofs"]] == [False, False]
    status = doc(project, "status", "daily_revenue")["models"][0]
    assert status["nondeterministic"] is True
    events = doc(project, "history", "daily_revenue")["events"]
    assert [e["detail"]["partition"] for e in events if e["kind"] == "nondeterministic"] == [
        "2025-01-01",
        "2025-01-02",
    ]


def test_changed_inputs_are_reported_not_blamed_on_the_model(project: Path) -> None:
    cli(project, "run", "daily_revenue", "--partition", "2025-01-01")
    run_id = doc(project, "status", "daily_revenue")["models"][0]["last_run"]["run_id"]
    warehouse_execute(
        project,
        "INSERT INTO orders SELECT order_id + 10000000, order_ts, customer_id, status, "
        "gross_amount, discount, refund FROM orders WHERE order_ts::DATE = DATE '2025-01-01' "
        "LIMIT 1",
    )
    again = doc(project, "rerun", run_id, "--partitions", "2025-01-01")
    [proof] = again["proofs"]
    assert (proof["same_inputs"], proof["deterministic"]) == (False, None)
    assert proof["before"] != proof["after"] and again["status"] == "succeeded"


def build_v2(project: Path) -> None:
    """A second version of daily_revenue: a check spelled otherwise, the same numbers."""
    (project / DAILY).write_text(
        (project / DAILY)
        .read_text()
        .replace(
            'expression = "net_revenue <= gross_revenue"',
            'expression = "net_revenue <= gross_revenue + 0"',
        )
    )
    cli(project, "build")


def test_another_version_needs_an_approval_that_is_recorded(project: Path) -> None:
    cli(project, "run", "daily_revenue", "--partition", RANGE)
    run_id = doc(project, "status", "daily_revenue")["models"][0]["last_run"]["run_id"]
    build_v2(project)
    judged = doc(
        project, "rerun", run_id, "--partitions", "2025-01-02", "--version", "v2", "--dry-run"
    )
    assert judged["judgment"][0]["verdict"] == "needs approval"
    refused = cli(project, "rerun", run_id, "--partitions", "2025-01-02", "--version", "v2", code=3)
    assert 'rerun with --approve "reason"' in refused.stderr
    done = doc(
        project,
        "rerun",
        run_id,
        "--partitions",
        "2025-01-02",
        "--version",
        "v2",
        "--approve",
        "the fixed check",
        "--as",
        "bob",
    )
    assert done["approval"]["by"] == "bob" and done["approval"]["reason"] == "the fixed check"
    [approval] = [
        e for e in doc(project, "history", "daily_revenue")["events"] if e["kind"] == "approval"
    ]
    assert (approval["actor"], approval["reason"], approval["run_id"]) == (
        "bob",
        "the fixed check",
        done["run_id"],
    )
    assert doc(project, "show", "run", done["run_id"])["plan"]["approval"]["by"] == "bob"


def test_more_partitions_than_the_configured_limit_need_approval(project: Path) -> None:
    config = project / "tidegate.toml"
    config.write_text(config.read_text() + "\n[rerun]\nmax_partitions = 2\n")
    cli(project, "run", "daily_revenue", "--partition", RANGE)
    run_id = doc(project, "status", "daily_revenue")["models"][0]["last_run"]["run_id"]
    judged = doc(project, "rerun", run_id, "--partitions", RANGE, "--dry-run")
    assert {j["verdict"] for j in judged["judgment"]} == {"needs approval"}
    assert "more than the 2" in judged["judgment"][0]["reason"]
    cli(project, "rerun", run_id, "--partitions", RANGE, code=3)
    assert doc(project, "rerun", run_id, "--partitions", "2025-01-01..2025-01-02")["status"] == (
        "succeeded"
    )


def test_bad_input_is_one_line_and_writes_nothing(project: Path) -> None:
    ledger = state_dump(project)
    for args in (("rerun", "nope"), ("rerun", "run-20250101T000000000000Z-abcdef")):
        result = cli(project, *args, code=2)
        assert len(result.stderr.strip().splitlines()) == 1
    assert state_dump(project) == ledger


def test_a_failed_rewrite_of_a_published_partition_is_selected(project: Path) -> None:
    """The partition still holds an older publish; this run's try at it failed: rerun it."""
    cli(project, "run", "daily_revenue", "--partition", RANGE)
    run_id = failed_third_day(project)
    judged = doc(project, "rerun", run_id, "--dry-run")
    verdicts = {j["partition"]: j["verdict"] for j in judged["judgment"]}
    assert verdicts["2025-01-03"] == "safe"
    assert [v for p, v in verdicts.items() if p != "2025-01-03"] == ["untouched"] * 4
    # once a later run has published it, the partition is no longer this run's to rerun
    cli(project, "run", "daily_revenue", "--partition", "2025-01-03")
    again = doc(project, "rerun", run_id, "--dry-run")
    assert {j["verdict"] for j in again["judgment"]} == {"untouched"}


def test_a_reviewed_plan_file_drives_the_rerun_and_is_kept_by_its_hash(
    project: Path, tmp_path: Path
) -> None:
    cli(project, "run", "daily_revenue", "--partition", RANGE)
    run_id = doc(project, "status", "daily_revenue")["models"][0]["last_run"]["run_id"]
    plan = tmp_path / "rerun.toml"
    plan.write_bytes(
        f'run_id = "{run_id}"\npartitions = "2025-01-02"\napprove = "runbook 7"\n'
        'approver = "carol"\n'.encode()
    )
    done = doc(project, "rerun", "--file", str(plan))
    assert [o["partition"] for o in done["outcomes"]] == ["2025-01-02"]
    shown = doc(project, "show", "run", done["run_id"])
    assert shown["plan_hash"] == hashlib.sha256(plan.read_bytes()).hexdigest()
    # the file is the whole plan: no flag may change it, and no key is guessed
    assert (
        "drop --partitions"
        in cli(project, "rerun", "--file", str(plan), "--partitions", RANGE, code=2).stderr
    )
    plan.write_text(f'run_id = "{run_id}"\npartition = "2025-01-02"\n')
    assert "unknown key 'partition'" in cli(project, "rerun", "--file", str(plan), code=2).stderr


def test_a_model_range_is_rerun_whatever_runs_wrote_it(project: Path) -> None:
    """The second form, `rerun MODEL --partitions RANGE`: no run to start from."""
    cli(project, "run", "daily_revenue", "--partition", "2025-01-01..2025-01-02")
    first = doc(project, "status", "daily_revenue")["models"][0]["last_run"]["run_id"]
    cli(project, "run", "daily_revenue", "--partition", "2025-01-03..2025-01-04")
    second = doc(project, "status", "daily_revenue")["models"][0]["last_run"]["run_id"]
    ledger, warehouse = state_dump(project), warehouse_dump(project)

    judged = doc(project, "rerun", "daily_revenue", "--partitions", RANGE, "--dry-run")
    assert judged["rerun_of"] is None and judged["model"] == "daily_revenue"
    assert [(j["partition"], j["written_by_run"], j["verdict"]) for j in judged["judgment"]] == [
        ("2025-01-01", first, "safe"),
        ("2025-01-02", first, "safe"),
        ("2025-01-03", second, "safe"),
        ("2025-01-04", second, "safe"),
        ("2025-01-05", None, "safe"),
    ]
    assert (state_dump(project), warehouse_dump(project)) == (ledger, warehouse)
    assert (
        "daily_revenue 2025-01-01..2025-01-05"
        in cli(project, "rerun", "daily_revenue", "--partitions", RANGE, "--dry-run").stdout
    )

    for _ in range(2):
        done = doc(project, "rerun", "daily_revenue", "--partitions", RANGE)
        assert done["status"] == "succeeded" and done["rerun_of"] is None
        assert [o["state"] for o in done["outcomes"]] == ["published"] * 5
        assert all(p["deterministic"] for p in done["proofs"]) and done["proofs"]
    shown = doc(project, "show", "run", done["run_id"])
    assert shown["kind"] == "rerun" and shown["plan"]["rerun_of"] is None


def test_a_model_range_rerun_needs_the_same_approvals(project: Path) -> None:
    config = project / "tidegate.toml"
    config.write_text(config.read_text() + "\n[rerun]\nmax_partitions = 2\n")
    cli(project, "run", "daily_revenue", "--partition", RANGE)
    judged = doc(project, "rerun", "daily_revenue", "--partitions", RANGE, "--dry-run")
    assert {j["verdict"] for j in judged["judgment"]} == {"needs approval"}
    refused = cli(project, "rerun", "daily_revenue", "--partitions", RANGE, code=3)
    assert 'rerun with --approve "reason"' in refused.stderr
    done = doc(
        project,
        *("rerun", "daily_revenue", "--partitions", RANGE),
        *("--approve", "month-end restatement", "--as", "bob"),
    )
    assert done["approval"]["by"] == "bob" and done["status"] == "succeeded"
    [approval] = [
        e for e in doc(project, "history", "daily_revenue")["events"] if e["kind"] == "approval"
    ]
    assert approval["run_id"] == done["run_id"] and approval["detail"]["rerun_of"] is None


def test_a_model_range_rerun_with_another_version(project: Path) -> None:
    cli(project, "run", "daily_revenue", "--partition", "2025-01-02")
    build_v2(project)
    args = ("rerun", "daily_revenue", "--partitions", "2025-01-02", "--version", "v2")
    judged = doc(project, *args, "--dry-run")
    assert (judged["seq"], judged["judgment"][0]["verdict"]) == (2, "needs approval")
    assert doc(project, *args, "--approve", "the fixed check")["status"] == "succeeded"


def test_a_model_without_a_range_is_refused_with_an_example(project: Path) -> None:
    ledger = state_dump(project)
    result = cli(project, "rerun", "daily_revenue", code=2)
    [line] = result.stderr.strip().splitlines()
    assert "--partitions" in line and "tidegate rerun daily_revenue --partitions 2025-" in line
    for args in (
        ("rerun", "no_such_model", "--partitions", "2025-01-01"),
        ("rerun", "daily_revenue", "--model", "daily_revenue", "--partitions", "2025-01-01"),
    ):
        assert len(cli(project, *args, code=2).stderr.strip().splitlines()) == 1
    assert state_dump(project) == ledger


def test_a_plan_file_may_name_a_model_and_its_range(project: Path, tmp_path: Path) -> None:
    cli(project, "run", "daily_revenue", "--partition", RANGE)
    plan = tmp_path / "rerun.toml"
    plan.write_text('model = "daily_revenue"\npartitions = "2025-01-02..2025-01-03"\n')
    done = doc(project, "rerun", "--file", str(plan))
    assert done["rerun_of"] is None
    assert [o["partition"] for o in done["outcomes"]] == ["2025-01-02", "2025-01-03"]
