"""G2 write–audit–publish: a partition that fails its audit never replaces the published one."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from tests.faults.ledger import recomputed_checksum
from tests.kit import FORCED, assert_no_staging, tidegate, warehouse_rows

MODEL = "daily_revenue"
DAY = date(2025, 1, 2)


def _show(project: Path) -> dict[str, Any]:
    shown = tidegate("show", "partition", MODEL, str(DAY), "--project", project, "--json")
    assert shown.exit_code == 0, shown.stderr
    document: dict[str, Any] = shown.json()
    return document


def _day_rows(project: Path) -> list[tuple[Any, ...]]:
    return warehouse_rows(
        project,
        "SELECT order_date, status, order_count, gross_revenue, net_revenue FROM daily_revenue "
        "WHERE order_date = ? ORDER BY status",
        [DAY],
    )


def _publish_with_first_version(project: Path) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    result = tidegate("run", MODEL, "--partition", str(DAY), "--project", project)
    assert result.exit_code == 0, result.stderr
    before = _show(project)
    assert before["state"] == "published"
    rows = _day_rows(project)
    assert rows, "the first version published no rows for the day"
    # the recorded checksum is the one of the rows the warehouse really holds
    assert recomputed_checksum(project, DAY) == before["published"]["checksum"]
    return before, rows


def _deploy_edited_model(project: Path, old: str, new: str) -> str:
    path = project / "models" / f"{MODEL}.sql"
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} not found once in {path}"
    path.write_text(text.replace(old, new))
    built = tidegate("build", "--project", project, "--json")
    assert built.exit_code == 0, built.stderr
    [entry] = [m for m in built.json()["models"] if m["model"] == MODEL]
    assert entry["created"] is True
    assert entry["change"] != "breaking", entry  # the contract (the header) did not change
    deployed = tidegate("deploy", MODEL, *FORCED, "--project", project, "--json")
    assert deployed.exit_code == 0, deployed.stderr
    assert deployed.json()["changed"] is True
    version_id: str = entry["version_id"]
    return version_id


def _assert_old_partition_untouched(
    project: Path,
    before: dict[str, Any],
    rows: list[tuple[Any, ...]],
    new_version: str,
    failing_check: str,
) -> dict[str, Any]:
    assert _day_rows(project) == rows
    assert recomputed_checksum(project, DAY) == before["published"]["checksum"]
    after = _show(project)
    assert after["published"] == before["published"]
    assert after["published"]["version"]["id"] != new_version
    last = after["last_attempt"]
    assert last["attempt_id"] != before["published"]["attempt_id"]
    assert last["state"] == "failed"
    assert last["version_id"] == new_version
    assert failing_check in (last["error"] or ""), last["error"]
    failed = [c["name"] for c in last["checks"] if not c["passed"]]
    assert failed == [failing_check], last["checks"]
    assert after["state"] == "failed"
    assert_no_staging(project)
    return after


def test_a_failing_blocking_check_leaves_the_published_partition_untouched(
    project: Path,
) -> None:
    before, rows = _publish_with_first_version(project)
    # same columns and types, but net revenue above gross: the expression check must block it
    new_version = _deploy_edited_model(
        project,
        "CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue",
        "CAST(sum(gross_amount) + 1 AS DECIMAL(18, 2)) AS net_revenue",
    )

    result = tidegate("run", MODEL, "--partition", str(DAY), "--project", project)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert "net_not_above_gross" in result.stdout

    _assert_old_partition_untouched(project, before, rows, new_version, "net_not_above_gross")


def test_a_contract_violation_leaves_the_published_partition_untouched(project: Path) -> None:
    before, rows = _publish_with_first_version(project)
    # the header still declares order_count BIGINT; the query now produces INTEGER
    new_version = _deploy_edited_model(
        project, "count(*) AS order_count", "CAST(count(*) AS INTEGER) AS order_count"
    )

    result = tidegate("run", MODEL, "--partition", str(DAY), "--project", project)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")

    after = _assert_old_partition_untouched(project, before, rows, new_version, "contract")
    [contract] = after["last_attempt"]["checks"]
    assert "order_count" in contract["message"] and "BIGINT" in contract["message"]


def test_a_failed_run_prints_one_json_document(project: Path) -> None:
    """--json output is one machine-readable document, also when the run fails (docs/design.md
    §6)."""
    _publish_with_first_version(project)
    _deploy_edited_model(
        project,
        "CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue",
        "CAST(sum(gross_amount) + 1 AS DECIMAL(18, 2)) AS net_revenue",
    )
    result = tidegate("run", MODEL, "--partition", str(DAY), "--project", project, "--json")
    assert result.exit_code == 1, (result.stdout, result.stderr)
    document = result.json()  # fails if a second document follows the first
    assert document["status"] == "failed"
    [outcome] = document["partitions"]
    assert outcome["state"] == "failed"
    assert "net_not_above_gross" in outcome["reason"]
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
