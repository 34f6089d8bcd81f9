"""validate, deploy behind a gate, rollback, pause/unpause, and what status says of a deploy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.kit import state_dump, tidegate, warehouse_rows

DAILY = Path("models") / "daily_revenue.sql"
SAMPLED = "2025-01-01..2025-01-03"
# A bug: net above gross on the days the completed orders are counted twice.
BAD_NET = (
    "CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue",
    "CAST(sum(gross_amount - discount - refund) * CASE WHEN status = 'completed' THEN 2 "
    "ELSE 1 END + CASE WHEN status = 'completed' THEN sum(gross_amount) ELSE 0 END "
    "AS DECIMAL(18, 2)) AS net_revenue",
)
# A new nullable column: an additive change.
WITH_MAX = (
    'net_revenue = "DECIMAL(18, 2) NOT NULL"\n',
    'net_revenue = "DECIMAL(18, 2) NOT NULL"\nmax_gross = "DECIMAL(18, 2)"\n',
)
MAX_SQL = ("AS net_revenue\n", "AS net_revenue,\n    max(gross_amount) AS max_gross\n")


def edit(project: Path, *replacements: tuple[str, str]) -> None:
    path = project / DAILY
    text = path.read_text()
    for old, new in replacements:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path.write_text(text)


def cli(project: Path, *args: str, code: int = 0) -> Any:
    result = tidegate(*args, "--project", project, "--json")
    assert result.exit_code == code, (args, result.stdout, result.stderr)
    return result


def build_version(project: Path, *replacements: tuple[str, str]) -> dict[str, Any]:
    edit(project, *replacements)
    built = cli(project, "build").json()
    return next(m for m in built["models"] if m["model"] == "daily_revenue")  # type: ignore[no-any-return]


def published(project: Path) -> list[tuple[Any, ...]]:
    return warehouse_rows(project, "SELECT * FROM daily_revenue ORDER BY ALL")


def active_seq(project: Path) -> int:
    status = cli(project, "status", "daily_revenue").json()
    return int(status["models"][0]["active_version"]["seq"])


def backfilled(project: Path, partitions: str = "2025-01-01..2025-01-10") -> None:
    cli(project, "backfill", "daily_revenue", "--partitions", partitions, "--batch-size", "5")


def test_a_new_version_deploys_only_after_its_gate_passes(project: Path) -> None:
    backfilled(project)
    v2 = build_version(project, MAX_SQL)
    assert v2["change"] == "modified"  # the header did not declare the column: the contract fails
    refused = tidegate("deploy", "daily_revenue", "--project", project)
    assert refused.exit_code == 3
    assert refused.stderr.strip().splitlines() == [
        "error: daily_revenue v2 has no validation gate; run `tidegate validate daily_revenue "
        "--version v2` first (or --force --reason TEXT)"
    ]
    assert active_seq(project) == 1

    failed = cli(project, "validate", "daily_revenue", "--partitions", SAMPLED, code=1).json()
    assert failed["passed"] is False
    assert [p["state"] for p in failed["partitions"]] == ["failed"] * 3
    assert "max_gross is not in the contract" in failed["partitions"][0]["reason"]
    assert tidegate("deploy", "daily_revenue", "--project", project).exit_code == 3

    edit(project, WITH_MAX)
    v3 = cli(project, "build").json()["models"][0]
    assert (v3["seq"], v3["change"]) == (3, "additive")
    gate = cli(project, "validate", "daily_revenue", "--sample", "3").json()
    assert gate["passed"] is True and gate["flaky"] is False
    # a sample of what v1 published: the oldest, the newest, one seeded in between
    labels = [p["partition"] for p in gate["partitions"]]
    assert labels[0] == "2025-01-01" and labels[-1] == "2025-01-10" and len(labels) == 3
    assert all(p["rows"] and p["checksum"] for p in gate["partitions"])
    deployed = cli(project, "deploy", "daily_revenue").json()
    assert (deployed["seq"], deployed["forced"]) == (3, False)
    assert deployed["gate"] == f"gate {gate['gate_id']} passed"

    history = cli(project, "history", "daily_revenue").json()["events"]
    kinds = [(e["kind"], e["detail"].get("passed")) for e in history if e["kind"] != "build"]
    assert kinds == [("deploy", None), ("gate", False), ("gate", True), ("deploy", None)]


def test_validating_never_changes_what_readers_see(project: Path) -> None:
    backfilled(project)
    before_rows, before_ledger = published(project), state_dump(project)
    build_version(project, BAD_NET)
    after_build = state_dump(project)
    gate = cli(project, "validate", "daily_revenue", "--partitions", SAMPLED, code=1).json()
    # the bad version's output was computed and checked: its invariant caught the bug
    failing = {c["name"] for p in gate["partitions"] for c in p["checks"] if not c["passed"]}
    assert "net_not_above_gross" in failing
    assert gate["shadow_table"] == "_tidegate_shadow.daily_revenue__v2"
    assert published(project) == before_rows
    # the ledger gained the build and the gate, nothing about partitions or runs
    after = state_dump(project)
    for table in ("partitions", "attempts", "runs", "model_state"):
        assert after[table] == before_ledger[table] == after_build[table], table
    assert len(after["gates"]) == 1
    refused = tidegate("deploy", "daily_revenue", "--project", project)
    assert refused.exit_code == 3 and "gate" in refused.stderr and "failed" in refused.stderr
    # the shadow holds the bad rows for inspection, apart from the published table
    shadow = warehouse_rows(
        project,
        "SELECT count(*) FROM _tidegate_shadow.daily_revenue__v2 "
        "WHERE order_date BETWEEN DATE '2025-01-01' AND DATE '2025-01-03'",
    )
    assert shadow[0][0] > 0


def test_a_forced_deploy_is_kept_with_its_reason(project: Path) -> None:
    build_version(project, BAD_NET)
    forced = cli(project, "deploy", "daily_revenue", "--force", "--reason", "hotfix #12").json()
    assert forced["forced"] is True
    [deploy] = [
        e
        for e in cli(project, "history", "daily_revenue").json()["events"]
        if e["kind"] == "deploy" and e["detail"]["forced"]
    ]
    assert deploy["reason"] == "hotfix #12"
    assert "no validation gate" in deploy["detail"]["gate"]


def test_a_gate_that_flips_on_the_same_inputs_is_flaky(project: Path) -> None:
    # a check that depends on chance, not on the data: the same inputs pass or fail. A fair coin
    # per row: forty validations that all agree have a chance below 2^-39 (with 0.9, a partition
    # of few rows passed forty times in a row now and then)
    edit(
        project,
        (
            'expression = "net_revenue <= gross_revenue"',
            'expression = "net_revenue <= gross_revenue AND random() < 0.5"',
        ),
    )
    cli(project, "build")
    verdicts: list[dict[str, Any]] = []
    while len({g["passed"] for g in verdicts}) < 2 and len(verdicts) < 40:
        result = tidegate(
            "validate",
            "daily_revenue",
            "--partitions",
            "2025-01-01",
            "--json",
            "--project",
            project,
        )
        assert result.exit_code in (0, 1), result.stderr
        verdicts.append(result.json())
    assert len({g["passed"] for g in verdicts}) == 2, "40 validations never disagreed"
    assert len({g["inputs"] for g in verdicts}) == 1
    assert verdicts[0]["flaky"] is False
    assert verdicts[-1]["flaky"] is True
    flagged = [
        e
        for e in cli(project, "history", "daily_revenue").json()["events"]
        if e["kind"] == "gate" and e["detail"]["flaky"]
    ]
    assert flagged


def test_rollback_makes_the_newer_version_s_partitions_stale(project: Path) -> None:
    backfilled(project, "2025-01-01..2025-01-04")
    edit(project, WITH_MAX, MAX_SQL)
    cli(project, "build")
    cli(project, "validate", "daily_revenue", "--partitions", "2025-01-01")
    cli(project, "deploy", "daily_revenue")
    cli(project, "run", "daily_revenue", "--partition", "2025-01-03..2025-01-04")

    done = cli(project, "rollback", "daily_revenue", "--reason", "max_gross is wrong").json()
    assert (done["seq"], done["schema"]) == (1, "tidegate.rollback/v1")
    status = cli(project, "status", "daily_revenue").json()["models"][0]
    assert status["active_version"]["seq"] == 1
    assert (status["partitions"]["published"], status["partitions"]["stale"]) == (2, 2)
    assert status["deploy"]["state"] == "pending"
    # forward fix: the stale partitions only
    plan = cli(
        project,
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-01-01..2025-01-04",
        "--stale-only",
        "--dry-run",
    ).json()
    assert plan["partitions"] == 2

    again = tidegate("rollback", "daily_revenue", "--to", "v1", "--project", project)
    assert again.exit_code == 2 and "already active" in again.stderr
    cli(project, "build")  # the project's files still hold v2
    edit(project, ("max(gross_amount) AS max_gross", "min(gross_amount) AS max_gross"))
    cli(project, "build")
    never = tidegate("rollback", "daily_revenue", "--to", "v3", "--project", project)
    assert never.exit_code == 2 and "never deployed" in never.stderr


def test_a_paused_model_is_not_run_until_unpaused(project: Path) -> None:
    cli(project, "pause", "daily_revenue", "--reason", "source incident")
    run = tidegate("run", "daily_revenue", "--partition", "2025-01-01", "--project", project)
    assert (run.exit_code, run.stderr.strip()) == (
        3,
        "error: model 'daily_revenue' is paused; `tidegate unpause daily_revenue` first "
        "(or --force)",
    )
    backfill = tidegate(
        "backfill", "daily_revenue", "--partitions", "2025-01-01", "--project", project
    )
    assert backfill.exit_code == 3
    # an operator may still run a paused model's partitions on purpose
    forced = cli(project, "run", "daily_revenue", "--partition", "2025-01-02", "--force").json()
    assert forced["published"] == 1
    assert "daily_revenue: paused, run anyway (--force)" in forced["notes"]
    cli(project, "backfill", "daily_revenue", "--partitions", "2025-01-03", "--force")
    tick = cli(project, "run", "--as-of", "2025-01-05T03:00:00Z").json()
    assert "daily_revenue: paused, not run" in tick["notes"]
    status = cli(project, "status", "daily_revenue").json()["models"][0]
    assert status["paused"] is True and status["next_partition"] is None
    assert cli(project, "pause", "daily_revenue").json()["changed"] is False

    assert cli(project, "unpause", "daily_revenue").json() == {
        "schema": "tidegate.pause/v1",
        "model": "daily_revenue",
        "paused": False,
        "changed": True,
        "stream": None,
    }
    cli(project, "run", "daily_revenue", "--partition", "2025-01-01")
    events = cli(project, "history", "daily_revenue").json()["events"]
    assert [(e["kind"], e["reason"]) for e in events if "pause" in e["kind"]] == [
        ("pause", "source incident"),
        ("unpause", None),
    ]


def test_status_tells_a_pending_deploy_from_a_confirmed_one(project: Path) -> None:
    as_of = ("--as-of", "2025-01-05T03:00:00Z")
    status = cli(project, "status", "daily_revenue", *as_of).json()["models"][0]
    assert status["deploy"] == {
        "version": "v1",
        "state": "pending",
        "confirmed_by_run": None,
        "correctness": None,  # a first version has nothing to be compared with
    }
    assert status["next_partition"] == {
        "partition": "2025-01-04",
        "through": "2025-01-04",
        "due_at": "2025-01-05T03:00:00+00:00",
        "version": "v1",
        "unpublished": ["2025-01-01..2025-01-03"],
    }
    tick = cli(project, "run", "daily_revenue", *as_of).json()
    status = cli(project, "status", "daily_revenue", *as_of).json()["models"][0]
    assert status["deploy"] == {
        "version": "v1",
        "state": "confirmed",
        "confirmed_by_run": tick["run_id"],
        "correctness": None,
    }
    human = tidegate("status", "--project", project, *as_of)
    assert f"daily_revenue: running v1 since run {tick['run_id']}" in human.stdout


def test_the_first_partition_of_a_new_version_is_compared_with_the_previous_one(
    project: Path,
) -> None:
    """v2 computes net_revenue differently and only warns about it; the first scheduled run
    publishes with it, and the post-deploy check records that it differs from v1 there."""
    as_of = ("--as-of", "2025-01-05T03:00:00Z")
    backfilled(project, "2025-01-01..2025-01-03")
    text = (project / DAILY).read_text()
    reconciliation = text[text.index('[[reconciliations]]\nname = "net_amount"') : text.index("*/")]
    edit(
        project,
        BAD_NET,
        (reconciliation, ""),
        ('name = "net_not_above_gross"\n', 'name = "net_not_above_gross"\nseverity = "warn"\n'),
    )
    cli(project, "build")
    cli(project, "deploy", "daily_revenue", "--force", "--reason", "net rule change")
    tick = cli(project, "run", "daily_revenue", *as_of).json()
    assert [(p["partition"], p["state"]) for p in tick["partitions"]] == [
        ("2025-01-04", "published")
    ]
    assert any("first partition 2025-01-04 against v1: different" in n for n in tick["notes"])
    status = cli(project, "status", "daily_revenue", *as_of).json()["models"][0]
    assert status["deploy"]["correctness"] == {
        "partition": "2025-01-04",
        "against": "v1",
        "agree": False,
    }
    [event] = [
        e
        for e in cli(project, "history", "daily_revenue").json()["events"]
        if e["kind"] == "correctness"
    ]
    assert event["detail"]["summary"]["keys_changed"] >= 1
    # v1's output for that day went to its shadow table, not to readers
    shadow = warehouse_rows(
        project,
        "SELECT count(*) FROM _tidegate_shadow.daily_revenue__v1 "
        "WHERE order_date = DATE '2025-01-04'",
    )
    assert shadow[0][0] > 0
    # a second run confirms nothing new: the check ran once
    cli(project, "run", "daily_revenue", "--partition", "2025-01-02")
    assert (
        len(
            [
                e
                for e in cli(project, "history", "daily_revenue").json()["events"]
                if e["kind"] == "correctness"
            ]
        )
        == 1
    )


def test_a_column_is_removed_only_after_its_declared_compatibility_window(
    project: Path,
) -> None:
    def deploy_keeping_gross_until(until: str) -> None:
        text = (project / DAILY).read_text()
        if "[deprecated]" in text:
            start = text.index("[deprecated]")
            text = text[:start] + text[text.index("[columns]") :]
        (project / DAILY).write_text(
            text.replace("[columns]\n", f'[deprecated]\ngross_revenue = "{until}"\n\n[columns]\n')
        )
        cli(project, "build")
        cli(project, "validate", "daily_revenue", "--partitions", "2025-01-01")
        cli(project, "deploy", "daily_revenue")

    # v2 keeps gross_revenue for its readers until a date still to come
    deploy_keeping_gross_until("2099-01-01")
    kept = (project / DAILY).read_text()
    gross_rule = kept[
        kept.index('[[reconciliations]]\nname = "gross_amount"') : kept.index(
            '[[reconciliations]]\nname = "net_amount"'
        )
    ]
    # v3 removes it (and what checked it)
    edit(
        project,
        ('[deprecated]\ngross_revenue = "2099-01-01"\n\n', ""),
        ('gross_revenue = "DECIMAL(18, 2) NOT NULL"\n', ""),
        ("    CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross_revenue,\n", ""),
        (gross_rule, ""),
        ('expression = "net_revenue <= gross_revenue"', 'expression = "net_revenue >= 0"'),
    )
    removed = (project / DAILY).read_text()
    assert cli(project, "build").json()["models"][0]["change"] == "breaking"
    cli(project, "validate", "daily_revenue", "--partitions", "2025-01-01")
    early = tidegate("deploy", "daily_revenue", "--project", project)
    assert early.exit_code == 3
    assert "monthly_revenue (gross_revenue)" in early.stderr and "[deprecated]" in early.stderr
    # --as-of does not move the calendar a window is promised on
    backdated = tidegate(
        "deploy", "daily_revenue", "--as-of", "2100-01-01T00:00:00Z", "--project", project
    )
    assert backdated.exit_code == 3

    # a window that has ended: the column may go though monthly_revenue still reads it
    (project / DAILY).write_text(kept)
    deploy_keeping_gross_until("2025-02-01")
    (project / DAILY).write_text(removed)
    assert cli(project, "build").json()["models"][0]["seq"] == 3
    late = cli(project, "deploy", "daily_revenue", "--version", "v3").json()
    assert (late["seq"], late["forced"]) == (3, False)


def build_rows(project: Path) -> dict[str, str]:
    """The line `build` prints for each model, by model."""
    result = tidegate("build", "--project", project)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    models = ("daily_revenue", "monthly_revenue", "revenue_report")
    return {m: next(line for line in lines if f" {m} " in line) for m in models}


def test_each_build_row_says_one_thing_of_its_version(undeployed_project: Path) -> None:
    """A version this build created is new or changed; one that existed is unchanged (and says
    whether it is deployed), never `new` and `already built` at once."""
    first = build_rows(undeployed_project)
    assert all(" new " in row and "already built" not in row for row in first.values()), first
    again = build_rows(undeployed_project)
    for row in again.values():
        assert " new " not in row and " unchanged " in row, row
        assert "already built" in row and "not deployed" in row, row
    for model in ("daily_revenue", "monthly_revenue", "revenue_report"):
        deployed = tidegate("deploy", model, "--project", undeployed_project)
        assert deployed.exit_code == 0, deployed.stderr
    edit(undeployed_project, BAD_NET)
    changed = build_rows(undeployed_project)["daily_revenue"]
    assert " modified " in changed and "already built" not in changed, changed
    rebuilt = build_rows(undeployed_project)["daily_revenue"]
    assert " unchanged " in rebuilt and " modified " not in rebuilt, rebuilt
    assert "not deployed (active: v1)" in rebuilt, rebuilt
    active = build_rows(undeployed_project)["monthly_revenue"]
    assert " unchanged " in active and "active" in active, active
