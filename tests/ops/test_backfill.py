"""Backfill through the real CLI: stop-loss triggers (G5), dry runs that write nothing, reviewed
plan files, --stale-only, the upstream guard, and bad input (G6).

Every test starts from the orders example at 20 rows/day (2025-01-01..2025-12-31), built and
deployed, with no partition published yet. Backfills run one partition per batch and one batch
in flight unless a test says otherwise, so "where it halted" is deterministic.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.kit import (
    FORCED,
    Result,
    spawn,
    state_dump,
    tidegate_events,
    warehouse_dump,
    warehouse_rows,
)
from tests.kit import tidegate as run_cli
from tests.ops.test_json_schemas import validator

DAILY = Path("models/daily_revenue.sql")

# A blocking check that fails for every day after 2025-01-10, and only for those.
LATE_DAYS_FAIL = (
    "[[checks]]\n"
    'name = "not_after_jan_10"\n'
    'type = "expression"\n'
    "expression = \"order_date <= DATE '2025-01-10'\"\n"
)


# -- helpers ---------------------------------------------------------------------------------


def backfill(project: Path, *args: str | Path) -> Result:
    """`tidegate backfill ARGS`; with --json (a start or a resume), its progress events too,
    from an --events-file (`Result.events`)."""
    if "--json" in args and args[0] not in ("stop", "list"):
        return tidegate_events("backfill", *args, "--project", project)
    return run_cli("backfill", *args, "--project", project)


def events(result: Result) -> list[dict[str, Any]]:
    """The progress events a `backfill … --json` wrote, each checked against its schema."""
    check = validator("backfill-event")
    for event in result.events:
        errors = list(check.iter_errors(event))
        assert not errors, (event, [e.message for e in errors])
    return list(result.events)


def end_of(result: Result) -> dict[str, Any]:
    """The run's end event, which its one result document on stdout repeats."""
    found = events(result)
    assert found and found[-1]["event"] == "end", (found, result.stdout)
    end = found[-1]
    document = result.json()  # raises unless stdout holds exactly one document
    errors = list(validator("backfill-result").iter_errors(document))
    assert not errors, [e.message for e in errors]
    assert document == {
        "schema": "tidegate.backfill-result/v1",
        **{k: v for k, v in end.items() if k not in ("schema", "event")},
    }
    return end


def show_run(project: Path, run_id: str) -> dict[str, Any]:
    shown = run_cli("show", "run", run_id, "--json", "--project", project)
    assert shown.exit_code == 0, shown.stderr
    document: dict[str, Any] = shown.json()
    errors = list(validator("run").iter_errors(document))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    return document


def show_partition(project: Path, model: str, label: str) -> dict[str, Any]:
    shown = run_cli("show", "partition", model, label, "--json", "--project", project)
    assert shown.exit_code == 0, shown.stderr
    document: dict[str, Any] = shown.json()
    return document


def edit_daily(project: Path, old: str, new: str) -> None:
    path = project / DAILY
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def add_to_daily_header(project: Path, toml: str) -> None:
    path = project / DAILY
    header, end, sql = path.read_text().partition("*/\n")
    path.write_text(header + toml + end + sql)


def redeploy(project: Path, model: str = "daily_revenue") -> str:
    built = run_cli("build", "--json", "--project", project)
    assert built.exit_code == 0, built.stderr
    version = next(m for m in built.json()["models"] if m["model"] == model)["version_id"]
    deployed = run_cli("deploy", model, "--version", version, *FORCED, "--project", project)
    assert deployed.exit_code == 0, deployed.stderr
    return str(version)


def published_days(project: Path) -> list[str]:
    """Days of daily_revenue in the warehouse (what a reader sees), oldest first."""
    exists = warehouse_rows(
        project,
        "SELECT count(*) FROM information_schema.tables "
        "WHERE table_schema = 'main' AND table_name = 'daily_revenue'",
    )
    if exists[0][0] == 0:
        return []
    rows = warehouse_rows(
        project, "SELECT DISTINCT CAST(order_date AS VARCHAR) FROM daily_revenue ORDER BY 1"
    )
    return [r[0] for r in rows]


def one_line(result: Result) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def assert_halted(
    project: Path, result: Result, trigger: str, at: str, published_through: str | None
) -> dict[str, Any]:
    """The backfill exited 1 halted by `trigger` at partition `at`: nothing after `at` was even
    attempted, and exactly the partitions up to `published_through` were published."""
    assert result.exit_code == 1, (result.stdout, result.stderr)
    end = end_of(result)
    assert end["status"] == "failed"
    assert end["trigger"] is not None, end
    assert (end["trigger"]["name"], end["trigger"]["partition"]) == (trigger, at), end
    assert f"stop-loss {trigger} at {at}" in one_line(result)

    run = show_run(project, end["run_id"])
    assert run["status"] == "failed"
    assert run["trigger"] is not None and run["trigger"].startswith(f"{trigger} at {at}: "), run
    attempted = [a["partition"] for a in run["attempts"]]
    assert attempted and max(attempted) == at, attempted
    published = sorted(a["partition"] for a in run["attempts"] if a["state"] == "published")
    expected = [p for p in sorted(attempted) if published_through and p <= published_through]
    assert published == expected, (published, expected)
    assert published_days(project) == published, "the warehouse holds other days"
    return run


# -- 1. every stop-loss trigger fires, records where, and publishes nothing after it ----------


def test_max_failures_from_the_command_line_halts_at_the_fth_failed_partition(
    project: Path,
) -> None:
    """`--max-failures 3` is a failure budget: the run stops after the third failed partition,
    not at the first (docs/design.md §3 stop-loss; the flag's help says "Stop after F failed
    partitions")."""
    add_to_daily_header(project, LATE_DAYS_FAIL)
    redeploy(project)
    result = backfill(
        project,
        *("daily_revenue", "--partitions", "2025-01-09..2025-01-20", "--max-failures", "3"),
        "--json",
    )
    run = assert_halted(project, result, "max_failures", "2025-01-13", "2025-01-10")
    failed = [a["partition"] for a in run["attempts"] if a["state"] == "failed"]
    assert failed == ["2025-01-11", "2025-01-12", "2025-01-13"]
    assert all(
        a["failed_checks"] == ["not_after_jan_10"]
        for a in run["attempts"]
        if a["state"] == "failed"
    )


def test_max_failures_from_a_plan_file_that_tolerates_check_failures(
    project: Path, tmp_path: Path
) -> None:
    add_to_daily_header(project, LATE_DAYS_FAIL)
    redeploy(project)
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'model = "daily_revenue"\npartitions = "2025-01-09..2025-01-20"\n'
        "max_failures = 2\nhalt_on_check_failure = false\n"
    )
    result = backfill(project, "--file", plan, "--json")
    run = assert_halted(project, result, "max_failures", "2025-01-12", "2025-01-10")
    assert run["plan"]["stop_loss"]["max_failures"] == 2
    assert run["plan"]["stop_loss"]["halt_on_check_failure"] is False


def test_max_failures_counts_partitions_whose_inputs_cannot_be_read(project: Path) -> None:
    """A partition can fail before it is computed (its source cannot be read): that failure
    counts toward the stop-loss like any other, and the run halts at the F-th one. The source
    is a view that plans but fails when its rows are read."""
    import duckdb

    con = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        con.execute("ALTER TABLE orders RENAME TO orders_stored")
        con.execute(
            "CREATE VIEW orders AS SELECT * REPLACE (CASE WHEN order_id > 0 "
            "THEN CAST(error('orders unreadable') AS DECIMAL(18, 2)) ELSE gross_amount END "
            "AS gross_amount) FROM orders_stored"
        )
    finally:
        con.close()
    result = backfill(
        project,
        *("daily_revenue", "--partitions", "2025-01-01..2025-01-06", "--max-failures", "2"),
        "--json",
    )
    run = assert_halted(project, result, "max_failures", "2025-01-02", None)
    assert [a["state"] for a in run["attempts"]] == ["failed", "failed"]
    assert all("orders" in (a["error"] or "") for a in run["attempts"])


def test_max_failure_ratio_from_a_plan_file(project: Path, tmp_path: Path) -> None:
    """1 of 4 done failed (25%), 2 of 5 (40%), 3 of 6 (50%): halts at the sixth partition."""
    add_to_daily_header(project, LATE_DAYS_FAIL)
    redeploy(project)
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'model = "daily_revenue"\npartitions = "2025-01-08..2025-01-20"\n'
        "max_failure_ratio = 0.5\nhalt_on_check_failure = false\n"
    )
    result = backfill(project, "--file", plan, "--json")
    run = assert_halted(project, result, "max_failure_ratio", "2025-01-13", "2025-01-10")
    assert [a["state"] for a in run["attempts"]] == ["published"] * 3 + ["failed"] * 3


def test_a_blocking_check_failure_halts_by_default(project: Path) -> None:
    add_to_daily_header(project, LATE_DAYS_FAIL)
    redeploy(project)
    result = backfill(project, "daily_revenue", "--partitions", "2025-01-09..2025-01-20", "--json")
    run = assert_halted(project, result, "check_failure", "2025-01-11", "2025-01-10")
    assert run["plan"]["stop_loss"]["halt_on_check_failure"] is True
    [failed] = [a for a in run["attempts"] if a["state"] == "failed"]
    assert failed["partition"] == "2025-01-11"
    assert failed["failed_checks"] == ["not_after_jan_10"]
    assert "not_after_jan_10" in failed["error"]


def test_resume_after_a_halt_continues_from_the_checkpoints_with_the_recorded_plan(
    project: Path,
) -> None:
    """The model is fixed in the project but not redeployed: resume still runs the recorded
    version, so it halts again at the same partition without redoing the published ones."""
    add_to_daily_header(project, LATE_DAYS_FAIL)
    redeploy(project)
    first = backfill(project, "daily_revenue", "--partitions", "2025-01-09..2025-01-20", "--json")
    assert first.exit_code == 1, first.stderr
    run_id = end_of(first)["run_id"]
    path = project / DAILY
    path.write_text(path.read_text().replace(LATE_DAYS_FAIL, ""))
    assert run_cli("build", "--project", project).exit_code == 0

    resumed = backfill(project, "resume", run_id, "--json")
    assert resumed.exit_code == 1, resumed.stderr
    stream = events(resumed)
    assert {e["run_id"] for e in stream} == {run_id}
    assert (
        stream[0]["event"] == "start"
        and stream[0]["version_id"] == show_run(project, run_id)["plan"]["version_id"]
    )
    retried = [e["partition"] for e in stream if e["event"] == "partition"]
    assert retried == ["2025-01-11"], "resume redid published partitions or went past the halt"
    assert end_of(resumed)["trigger"]["name"] == "check_failure"
    run = show_run(project, run_id)
    attempts = sorted((a["partition"], a["state"]) for a in run["attempts"])
    assert attempts == [
        ("2025-01-09", "published"),
        ("2025-01-10", "published"),
        ("2025-01-11", "failed"),
        ("2025-01-11", "failed"),
    ]
    assert published_days(project) == ["2025-01-09", "2025-01-10"]


def test_a_reconciliation_mismatch_halts_and_shows_both_values(project: Path) -> None:
    """The produced order count is one more than the source's for days after 2025-01-10."""
    edit_daily(
        project,
        'target_expression = "sum(order_count)"',
        "target_expression = \"sum(order_count) + CASE WHEN max(order_date) > DATE '2025-01-10' "
        'THEN 1 ELSE 0 END"',
    )
    redeploy(project)
    result = backfill(project, "daily_revenue", "--partitions", "2025-01-09..2025-01-20", "--json")
    run = assert_halted(project, result, "reconciliation_mismatch", "2025-01-11", "2025-01-10")
    by_partition = {a["partition"]: a for a in run["attempts"]}
    mismatched = {r["name"]: r for r in by_partition["2025-01-11"]["reconciliations"]}
    assert mismatched["row_count"]["passed"] is False
    assert (mismatched["row_count"]["source_value"], mismatched["row_count"]["target_value"]) == (
        "20",
        "21",
    )
    assert mismatched["row_count"]["tolerance"] == "0"
    assert mismatched["gross_amount"]["passed"] is True
    assert by_partition["2025-01-11"]["failed_checks"] == []
    assert "row_count" in by_partition["2025-01-11"]["error"]
    good = {r["name"]: r for r in by_partition["2025-01-10"]["reconciliations"]}
    assert good["row_count"] == {
        "name": "row_count",
        "source_value": "20",
        "target_value": "20",
        "tolerance": "0",
        "passed": True,
    }


def test_a_mismatch_within_tolerance_is_published(project: Path) -> None:
    """The same off-by-one with tolerance = 1 is accepted: the tolerance is really applied."""
    edit_daily(
        project,
        'target_expression = "sum(order_count)"\n',
        "target_expression = \"sum(order_count) + CASE WHEN max(order_date) > DATE '2025-01-10' "
        'THEN 1 ELSE 0 END"\ntolerance = 1\n',
    )
    redeploy(project)
    result = backfill(project, "daily_revenue", "--partitions", "2025-01-10..2025-01-12", "--json")
    assert result.exit_code == 0, result.stderr
    run = show_run(project, end_of(result)["run_id"])
    counts = {
        a["partition"]: next(r for r in a["reconciliations"] if r["name"] == "row_count")
        for a in run["attempts"]
    }
    assert counts["2025-01-12"]["target_value"] == "21"
    assert counts["2025-01-12"]["tolerance"] == "1"
    assert all(r["passed"] for r in counts.values())
    assert published_days(project) == ["2025-01-10", "2025-01-11", "2025-01-12"]


def test_max_source_rows_budget_from_a_plan_file(project: Path, tmp_path: Path) -> None:
    """20 source rows a day: the third partition takes the total to 60 > 50 and it halts there."""
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'model = "daily_revenue"\npartitions = "2025-01-01..2025-01-10"\nmax_source_rows = 50\n'
    )
    result = backfill(project, "--file", plan, "--json")
    assert_halted(project, result, "max_source_rows", "2025-01-03", "2025-01-03")
    assert end_of(result)["source_rows"] == 60


def test_max_wall_seconds_from_a_plan_file(project: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'model = "daily_revenue"\npartitions = "2025-01-01..2025-01-10"\n'
        "max_wall_seconds = 0.000001\n"
    )
    result = backfill(project, "--file", plan, "--json")
    assert_halted(project, result, "max_wall_time", "2025-01-01", "2025-01-01")


# -- stop: honoured promptly, even while the rate limiter waits ------------------------------


def test_a_stop_request_is_honoured_while_the_rate_limiter_waits(project: Path) -> None:
    """At 1 batch a minute the backfill waits ~60 s after its first partition; `backfill stop`
    must end it after the in-flight batches (none), not after the wait (docs/design.md §3:
    stoppable)."""
    process = spawn(
        *("backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-03"),
        *("--rate", "1/min", "--json", "--events", "jsonl", "--project", project),
    )
    assert process.stderr is not None  # --events jsonl: the events, a line each, on stderr
    start = json.loads(process.stderr.readline())
    first = json.loads(process.stderr.readline())
    assert (first["event"], first["partition"], first["state"]) == (
        "partition",
        "2025-01-01",
        "published",
    )
    asked = run_cli("backfill", "stop", start["run_id"], "--json", "--project", project)
    assert asked.exit_code == 0, asked.stderr
    assert asked.json() == {
        "schema": "tidegate.backfill-stop/v1",
        "run_id": start["run_id"],
        "stop_requested": True,
    }
    try:
        stdout, stderr = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail("the stop took effect only after the rate limiter's 60 s wait")
    assert process.returncode == 5, stderr
    *rest, error = stderr.splitlines()
    assert error.startswith("error: ") and "stopped on request" in error, stderr
    end = json.loads(rest[-1])
    assert (end["event"], end["status"], end["published"]) == ("end", "stopped", 1)
    result = json.loads(stdout)  # the one result document, also for a stopped run
    assert (result["schema"], result["status"], result["published"]) == (
        "tidegate.backfill-result/v1",
        "stopped",
        1,
    )
    run = show_run(project, start["run_id"])
    assert run["status"] == "stopped" and run["stop_requested_at"] is not None
    assert [a["partition"] for a in run["attempts"]] == ["2025-01-01"]
    again = backfill(project, "stop", start["run_id"])
    assert again.exit_code == 2 and "not running" in one_line(again)


# -- 3. --dry-run writes nothing ------------------------------------------------------------


def warehouse_bytes(project: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(project.glob("warehouse.duckdb*"))
    }


def test_dry_run_prints_the_blast_radius_and_writes_nothing(project: Path) -> None:
    ok = backfill(project, "daily_revenue", "--partitions", "2025-01-01..2025-01-02")
    assert ok.exit_code == 0, ok.stderr  # some history, so the ledger is not empty
    ledger, files = state_dump(project), warehouse_bytes(project)
    assert "warehouse.duckdb" in files

    args = ("daily_revenue", "--partitions", "2025-02-01..2025-02-20", "--batch-size", "7")
    human = backfill(project, *args, "--rate", "12/min", "--dry-run")
    as_json = backfill(project, *args, "--rate", "12/min", "--dry-run", "--json")
    assert (human.exit_code, as_json.exit_code) == (0, 0), (human.stderr, as_json.stderr)
    assert state_dump(project) == ledger, "a dry run wrote to the ledger"
    assert warehouse_bytes(project) == files, "a dry run changed the warehouse file"

    [[orders]] = warehouse_rows(
        project,
        "SELECT count(*) FROM orders WHERE order_ts >= TIMESTAMP '2025-02-01' "
        "AND order_ts < TIMESTAMP '2025-02-21'",
    )
    assert orders == 20 * 20
    plan = as_json.json()
    assert not list(validator("backfill-plan").iter_errors(plan))
    assert plan["partitions"] == 20 and plan["batches"] == 3
    assert plan["ranges"] == ["2025-02-01..2025-02-20"]
    assert plan["first_batches"] == [
        "2025-02-01..2025-02-07",
        "2025-02-08..2025-02-14",
        "2025-02-15..2025-02-20",
    ]
    assert plan["source_rows"] == {"orders": orders}
    assert plan["downstream"] == ["monthly_revenue", "revenue_report"]
    assert plan["rate_per_minute"] == 12

    text = human.stdout
    assert "20 in 3 batch(es) of up to 7: 2025-02-01..2025-02-20" in text
    assert f"{orders:,} rows of source orders" in text
    assert "monthly_revenue, revenue_report" in text
    assert "12 batch starts/min" in text
    assert text.rstrip().endswith("nothing was written")
    assert backfill(project, "list", "--json").json()["runs"][0]["partitions"] == (
        "2025-01-01..2025-01-02"
    ), "the dry run was recorded as a backfill"


# -- 4. reviewed plan files -----------------------------------------------------------------

PLAN = (
    "# reviewed in TICKET-1\n"
    'model = "daily_revenue"\n'
    'partitions = "2025-01-01..2025-01-06"\n'
    "batch_size = 3\n"
    "max_concurrency = 2\n"
    'rate = "120/min"\n'
    "max_failures = 5\n"
)


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_a_plan_file_is_recorded_by_its_hash_and_its_parameters_are_used(
    project: Path, tmp_path: Path, newline: str
) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_bytes(PLAN.replace("\n", newline).encode())
    result = backfill(project, "daily_revenue", "--file", plan, "--json")
    assert result.exit_code == 0, result.stderr
    run = show_run(project, end_of(result)["run_id"])
    assert run["plan_hash"] == hashlib.sha256(plan.read_bytes()).hexdigest()
    recorded = run["plan"]
    assert (recorded["batch_size"], recorded["max_concurrency"]) == (3, 2)
    assert recorded["rate_per_minute"] == 120
    assert recorded["stop_loss"]["max_failures"] == 5
    assert recorded["requested"] == run["partitions"] == "2025-01-01..2025-01-06"
    assert [
        (a["partition"], a["batch"]) for a in sorted(run["attempts"], key=lambda a: a["partition"])
    ] == [
        ("2025-01-01", 0),
        ("2025-01-02", 0),
        ("2025-01-03", 0),
        ("2025-01-04", 1),
        ("2025-01-05", 1),
        ("2025-01-06", 1),
    ]
    listed = backfill(project, "list", "--json").json()["runs"]
    assert listed[0]["plan_hash"] == run["plan_hash"]


def refused(project: Path, *args: str | Path) -> str:
    """`backfill ARGS` exits 2 with one line on stderr and writes nothing."""
    ledger, warehouse = state_dump(project), warehouse_dump(project)
    result = backfill(project, *args)
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    line = one_line(result)
    assert state_dump(project) == ledger, "the ledger changed"
    assert warehouse_dump(project) == warehouse, "the warehouse changed"
    return line


def test_a_plan_file_with_an_unknown_key_is_refused(project: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN + "max_retries = 3\n")
    assert "max_retries" in refused(project, "--file", plan)


def test_a_plan_file_does_not_mix_with_flags(project: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    assert "--batch_size" in refused(project, "daily_revenue", "--file", plan, "--batch-size", "2")


def test_a_plan_file_for_another_model_is_refused(project: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    line = refused(project, "monthly_revenue", "--file", plan)
    assert "daily_revenue" in line and "monthly_revenue" in line


def test_a_plan_file_with_a_toml_error_names_its_line(project: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN + "batch_size = = 4\n")
    line = refused(project, "--file", plan)
    assert f"{plan}:8:" in line, line


# -- 5. --stale-only ------------------------------------------------------------------------


def test_stale_only_selects_the_partitions_the_active_version_did_not_write(
    project: Path,
) -> None:
    first = backfill(project, "daily_revenue", "--partitions", "2025-01-01..2025-01-10")
    assert first.exit_code == 0, first.stderr
    edit_daily(project, "count(*) AS order_count", "count(order_id) AS order_count")
    redeploy(project)
    part = backfill(project, "daily_revenue", "--partitions", "2025-01-03..2025-01-05", "--json")
    assert part.exit_code == 0, part.stderr
    part_run = end_of(part)["run_id"]

    args = ("daily_revenue", "--partitions", "2025-01-01..2025-01-10", "--stale-only")
    dry = backfill(project, *args, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.stderr
    plan = dry.json()
    assert plan["stale_only"] is True
    assert plan["partitions"] == 7
    assert plan["ranges"] == ["2025-01-01..2025-01-02", "2025-01-06..2025-01-10"]

    stale = backfill(project, *args, "--json")
    assert stale.exit_code == 0, stale.stderr
    outcomes = [e for e in events(stale) if e["event"] == "partition"]
    expected = ["2025-01-01", "2025-01-02"] + [f"2025-01-{d:02d}" for d in range(6, 11)]
    assert sorted(e["partition"] for e in outcomes) == expected
    assert {e["state"] for e in outcomes} == {"published"}
    run = show_run(project, end_of(stale)["run_id"])
    assert sorted(a["partition"] for a in run["attempts"]) == expected
    assert run["plan"]["stale_only"] is True
    # written by the partial run: left alone
    assert show_partition(project, "daily_revenue", "2025-01-04")["published"]["run_id"] == (
        part_run
    )
    status = run_cli("status", "daily_revenue", "--json", "--project", project).json()
    assert status["models"][0]["partitions"]["stale"] == 0

    again = refused(project, *args)
    assert "nothing to backfill" in again


# -- 6. the upstream guard: missing input is skipped, never published empty ----------------


def test_a_month_whose_days_are_missing_is_skipped_naming_the_missing_range(
    project: Path,
) -> None:
    days = backfill(project, "daily_revenue", "--partitions", "2025-02-01..2025-02-10")
    assert days.exit_code == 0, days.stderr
    result = backfill(project, "monthly_revenue", "--partitions", "2025-02", "--json")
    assert result.exit_code == 1, result.stderr
    [outcome] = [e for e in events(result) if e["event"] == "partition"]
    assert outcome["state"] == "skipped"
    assert outcome["reason"] == "upstream not ready: daily_revenue 2025-02-11..2025-02-28"
    assert end_of(result)["published"] == 0
    shown = show_partition(project, "monthly_revenue", "2025-02")
    assert shown["state"] == "skipped" and shown["published"] is None
    assert shown["last_attempt"]["error"] == outcome["reason"]
    tables = warehouse_rows(
        project,
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'monthly_revenue'",
    )
    if tables[0][0]:
        assert warehouse_rows(project, "SELECT count(*) FROM monthly_revenue") == [(0,)]


def test_a_day_without_source_rows_is_skipped_not_published_empty(project: Path) -> None:
    result = backfill(project, "daily_revenue", "--partitions", "2026-01-04..2026-01-05", "--json")
    assert result.exit_code == 1, result.stderr
    outcomes = [e for e in events(result) if e["event"] == "partition"]
    assert [(e["partition"], e["state"]) for e in outcomes] == [
        ("2026-01-04", "skipped"),
        ("2026-01-05", "skipped"),
    ]
    assert all(
        e["reason"] == "source orders has 0 row(s) in the partition's window (at least 1 expected)"
        for e in outcomes
    )
    assert show_partition(project, "daily_revenue", "2026-01-05")["published"] is None
    assert published_days(project) == []


def test_the_completeness_threshold_is_configured_per_source(project: Path) -> None:
    config = project / "tidegate.toml"
    # every generated day holds 20 orders: demanding 21 skips them all
    config.write_text(
        config.read_text().replace(
            'time_column = "order_ts"', 'time_column = "order_ts"\nmin_rows = 21'
        )
    )
    result = backfill(project, "daily_revenue", "--partitions", "2025-01-01..2025-01-02", "--json")
    assert result.exit_code == 1, result.stderr
    reasons = [e["reason"] for e in events(result) if e["event"] == "partition"]
    assert (
        reasons
        == ["source orders has 20 row(s) in the partition's window (at least 21 expected)"] * 2
    )
    # 0 turns the guard off: a day without orders is then published, empty
    config.write_text(config.read_text().replace("min_rows = 21", "min_rows = 0"))
    result = backfill(project, "daily_revenue", "--partitions", "2026-01-04", "--json")
    assert result.exit_code == 0, result.stderr
    shown = show_partition(project, "daily_revenue", "2026-01-04")
    assert shown["published"]["rows"] == 0


# -- 7. bad input: exit 2, one line, nothing written ----------------------------------------

BAD = {
    "reversed range": (("--partitions", "2025-01-05..2025-01-01"), "2025-01-05..2025-01-01"),
    "batch size 0": (("--partitions", "2025-01-01..2025-01-02", "--batch-size", "0"), "batch"),
    "negative batch size": (
        ("--partitions", "2025-01-01..2025-01-02", "--batch-size", "-1"),
        "batch",
    ),
    "concurrency 0": (
        ("--partitions", "2025-01-01..2025-01-02", "--max-concurrency", "0"),
        "concurrency",
    ),
    "rate per hour": (("--partitions", "2025-01-01..2025-01-02", "--rate", "5/hour"), "5/hour"),
    "max failures 0": (
        ("--partitions", "2025-01-01..2025-01-02", "--max-failures", "0"),
        "max-failures",
    ),
    "no range": ((), "partitions"),
    "before the model's start": (("--partitions", "2024-12-30..2025-01-02"), "2025-01-01"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_backfill_input_is_refused(project: Path, case: str) -> None:
    args, named = BAD[case]
    line = refused(project, "daily_revenue", *args)
    assert named in line, line


def test_an_unknown_model_is_refused(project: Path) -> None:
    line = refused(project, "no_such_model", "--partitions", "2025-01-01..2025-01-02")
    assert "no_such_model" in line


def test_a_model_without_an_active_version_is_refused(undeployed_project: Path) -> None:
    built = run_cli("build", "--project", undeployed_project)
    assert built.exit_code == 0, built.stderr
    line = refused(undeployed_project, "daily_revenue", "--partitions", "2025-01-01..2025-01-02")
    assert "no active version" in line and "deploy" in line


# -- batches split by missing input, and budgets checked before the next batch ----------------


def test_a_batch_split_by_missing_days_publishes_each_unit_from_its_own_rows(
    project: Path,
) -> None:
    import duckdb

    con = duckdb.connect(str(project / "warehouse.duckdb"))
    con.execute("DELETE FROM orders WHERE CAST(order_ts AS DATE) IN ('2025-01-02', '2025-01-05')")
    con.close()
    result = backfill(
        project,
        "daily_revenue",
        "--partitions",
        "2025-01-01..2025-01-07",
        "--batch-size",
        "7",
        "--json",
    )
    assert result.exit_code == 1, result.stderr  # two partitions skipped
    states = {e["partition"]: e["state"] for e in events(result) if e["event"] == "partition"}
    assert states == {
        "2025-01-01": "published",
        "2025-01-02": "skipped",
        "2025-01-03": "published",
        "2025-01-04": "published",
        "2025-01-05": "skipped",
        "2025-01-06": "published",
        "2025-01-07": "published",
    }
    oracle = warehouse_rows(
        project,
        "SELECT CAST(order_ts AS DATE), status, count(*), sum(gross_amount), "
        "sum(gross_amount - discount - refund) FROM orders "
        "WHERE order_ts < TIMESTAMP '2025-01-08' GROUP BY ALL ORDER BY 1, 2",
    )
    published = warehouse_rows(
        project,
        "SELECT order_date, status, order_count, gross_revenue, net_revenue FROM daily_revenue "
        "ORDER BY 1, 2",
    )
    assert published == oracle
    markers = warehouse_rows(
        project, "SELECT count(*) FROM _tidegate.commit_markers WHERE model = 'daily_revenue'"
    )
    assert markers == [(5,)]


def test_a_source_row_budget_stops_new_batches_before_any_finishes(project: Path) -> None:
    plan = project / "budget.toml"
    plan.write_text(
        'model = "daily_revenue"\npartitions = "2025-01-01..2025-01-31"\n'
        "batch_size = 1\nmax_concurrency = 4\nmax_source_rows = 10\n"
    )
    result = backfill(project, "--file", plan, "--json")
    assert result.exit_code == 1, result.stderr
    end = end_of(result)
    assert end["trigger"]["name"] == "max_source_rows"
    attempted = [e for e in events(result) if e["event"] == "partition"]
    # the first batch read 20 rows: no second batch was started, though 4 could run at once
    assert len(attempted) == 1


def test_resuming_a_backfill_that_succeeded_is_a_no_op(project: Path) -> None:
    """Retry loops and orchestrators may call resume again: a finished run is left as it is."""
    started = backfill(project, "daily_revenue", "--partitions", "2025-01-01..2025-01-02", "--json")
    run_id = end_of(started)["run_id"]
    ended_at = show_run(project, run_id)["ended_at"]
    ledger = state_dump(project)
    again = backfill(project, "resume", run_id)
    assert again.exit_code == 0, again.stderr
    assert again.stdout.strip() == f"nothing to resume: {run_id} succeeded at {ended_at}"
    as_json = backfill(project, "resume", run_id, "--json")
    assert as_json.exit_code == 0, as_json.stderr
    [end] = events(as_json)
    assert end_of(as_json) == end  # and stdout's one document is the same result
    assert (end["event"], end["run_id"], end["status"], end["nothing_to_resume"]) == (
        "end",
        run_id,
        "succeeded",
        True,
    )
    assert end["reason"] == f"nothing to resume: {run_id} succeeded at {ended_at}"
    assert state_dump(project) == ledger


@pytest.mark.parametrize(
    ("group", "main_form", "subcommands"),
    [
        (
            "backfill",
            "tidegate backfill MODEL --partitions START..END [OPTIONS]",
            ("resume", "stop", "list"),
        ),
        (
            "recover",
            "tidegate recover MODEL [--partitions START..END] [OPTIONS]",
            ("resume", "stop"),
        ),
    ],
)
def test_the_help_shows_the_main_form_its_options_and_the_subcommands(
    group: str, main_form: str, subcommands: tuple[str, ...]
) -> None:
    for args in ((group, "--help"), (group, "daily_revenue", "--help")):
        shown = run_cli(*args)
        assert shown.exit_code == 0, shown.stderr
        assert main_form in shown.stdout, shown.stdout
        assert "--batch-size" in shown.stdout and "--dry-run" in shown.stdout
        # the main form runs a hidden command: no help may send anyone to it
        assert f"{group} start" not in shown.stdout
    listed = run_cli(group, "--help").stdout
    for word in subcommands:
        assert f"tidegate {group} {word} RUN_ID" in listed or f"  {word} " in listed, word


def test_a_backfill_without_a_range_shows_one(project: Path, tmp_path: Path) -> None:
    ledger = state_dump(project)
    missing = backfill(project, "daily_revenue")
    assert missing.exit_code == 2
    [line] = missing.stderr.splitlines()
    assert "--partitions 2025-01-01..2025-12-31" in line and "--partitions all" in line
    assert "key-range" in line
    plan = tmp_path / "plan.toml"
    plan.write_text('model = "daily_revenue"\n')
    from_file = backfill(project, "--file", plan)
    assert from_file.exit_code == 2
    [line] = from_file.stderr.splitlines()
    assert 'partitions = "2025-01-01..2025-12-31"' in line and '"all"' in line
    unnamed = backfill(project, "--partitions", "2025-01-01")
    assert unnamed.exit_code == 2 and "tidegate backfill MODEL --partitions" in unnamed.stderr
    assert state_dump(project) == ledger


def test_ctrl_c_ends_with_one_message_naming_the_run_and_its_count(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the second partition: the run stops after its in-flight batch, exits 130,
    and says once what it published of the run and how to resume — not as an error. The key
    press is acknowledged on the progress (a second Ctrl-C aborts), not as a second message."""
    import os
    import signal

    from tidegate.progress import BackfillProgress

    outcome = BackfillProgress.outcome

    def interrupted_after_two(self: BackfillProgress, done: Any) -> None:
        outcome(self, done)
        if self.done == 2:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(BackfillProgress, "outcome", interrupted_after_two)
    result = run_cli(
        *("backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-10"),
        *("--project", project),
    )
    assert result.exit_code == 130, (result.exit_code, result.stderr)
    [run] = run_cli("backfill", "list", "--json", "--project", project).json()["runs"]
    lines = result.stderr.splitlines()
    assert lines == [
        f"stopped on request (Ctrl-C): 2 of 10 published; "
        f"resume with tidegate backfill resume {run['run_id']}",
    ], lines
    acknowledged = f"{run['run_id']}: 2/10 partitions, stopping after in-flight batches"
    assert acknowledged in result.stdout, result.stdout


def test_a_check_failure_stop_loss_names_the_check_and_the_next_command(project: Path) -> None:
    """The halt says which check failed and how, and what to run once the input is fixed."""
    add_to_daily_header(project, LATE_DAYS_FAIL)
    redeploy(project)
    result = backfill(project, "daily_revenue", "--partitions", "2025-01-09..2025-01-20", "--json")
    end = end_of(result)
    run_id = end["run_id"]
    detail = "not_after_jan_10: 2 row(s) violate it"
    assert end["trigger"]["detail"] == detail, end
    line = one_line(result)
    assert f"stop-loss check_failure at 2025-01-11: {detail}" in line, line
    assert line.endswith(f"fix the input, then: tidegate rerun {run_id}"), line
    assert show_run(project, run_id)["trigger"] == f"check_failure at 2025-01-11: {detail}"
