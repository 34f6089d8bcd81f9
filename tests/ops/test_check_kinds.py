"""The check kinds beyond violation counts, through the real CLI on the orders example (20
orders a day): a failing warn check is recorded and shown while its partition publishes; a
failing blocking one stops the publish (and a backfill) and leaves the published rows alone.

Expected values are measured independently, from the warehouse, not taken from tidegate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.kit import (
    assert_no_staging,
    tidegate,
    warehouse_dump,
    warehouse_execute,
    warehouse_rows,
)
from tests.ops.test_backfill import (
    add_to_daily_header,
    backfill,
    end_of,
    redeploy,
    show_partition,
    show_run,
)

MODEL = "daily_revenue"

WARN_CHECKS = """
[[checks]]
name = "fresh_within_an_hour"
type = "freshness"
column = "order_date"
max_age = "1h"
severity = "warn"

[[checks]]
name = "five_statuses"
type = "distinct_count"
columns = ["status"]
min = 5
severity = "warn"

[[checks]]
name = "most_orders_per_row"
type = "row_count"
relative_to = "source"
source = "orders"
max_ratio = 0.01
severity = "warn"

[[checks]]
name = "status_always_set"
type = "null_ratio"
column = "status"
max = 0
severity = "warn"
"""

# Every day's rows are compared with the day before; any ratio above 0.01 is reported.
AGAINST_PREVIOUS = """
[[checks]]
name = "against_previous"
type = "row_count"
relative_to = "previous"
max_ratio = 0.01
severity = "warn"
"""

# A date column's newest value is the day's start: never within an hour of the day's end.
STALE_BLOCKS = """
[[checks]]
name = "fresh_or_stop"
type = "freshness"
column = "order_date"
max_age = "1h"
"""

# Fails for every day after 2025-01-02, reading the source as well as the staged rows.
LATE_DAYS_BLOCK = """
[[checks]]
name = "nothing_after_jan_2"
type = "query"
sql = \"\"\"
SELECT t.order_date, t.status FROM this AS t
WHERE t.order_date > DATE '2025-01-02'
  AND t.status IN (SELECT status FROM orders)
\"\"\"
"""


def checks_of(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in document["published"]["checks"]}


def day_rows(project: Path, day: str) -> int:
    """Rows daily_revenue holds for `day`, read from the warehouse."""
    [(count,)] = warehouse_rows(
        project, "SELECT count(*) FROM daily_revenue WHERE order_date = CAST(? AS DATE)", [day]
    )
    return int(count)


def source_day(project: Path, day: str) -> tuple[int, int]:
    """(orders, distinct statuses) of `day` in the source."""
    [(orders, statuses)] = warehouse_rows(
        project,
        "SELECT count(*), count(DISTINCT status) FROM orders "
        "WHERE CAST(order_ts AS DATE) = CAST(? AS DATE)",
        [day],
    )
    return int(orders), int(statuses)


def test_failing_warn_checks_of_the_new_kinds_are_shown_and_the_partitions_publish(
    project: Path,
) -> None:
    add_to_daily_header(project, WARN_CHECKS)
    redeploy(project)
    days = ["2025-03-01", "2025-03-02"]
    result = tidegate("run", MODEL, "--partition", f"{days[0]}..{days[1]}", "--project", project)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    for day in days:
        document = show_partition(project, MODEL, day)
        assert document["state"] == "published"
        rows, (orders, statuses) = day_rows(project, day), source_day(project, day)
        assert document["published"]["rows"] == rows > 0
        found = checks_of(document)

        fresh = found["fresh_within_an_hour"]
        assert (fresh["passed"], fresh["severity"]) == (False, "warn")
        assert fresh["measured"] == f"{day} 00:00:00"
        assert fresh["message"] == f"newest {day} 00:00:00, expected at least {day} 23:00:00"

        distinct = found["five_statuses"]
        assert statuses < 5
        assert (distinct["passed"], distinct["measured"]) == (False, str(statuses))

        relative = found["most_orders_per_row"]
        assert (relative["passed"], relative["measured"]) == (False, str(rows))
        assert relative["message"] == (
            f"{rows} rows, {rows / orders:.3g} of {orders} in source orders (max ratio 0.01)"
        )

        nulls = found["status_always_set"]
        assert (nulls["passed"], nulls["measured"], nulls["message"]) == (True, "0", "ok")

    text = tidegate("show", "partition", MODEL, days[0], "--project", project).stdout
    assert "check five_statuses: warn" in text


def test_a_row_count_against_the_previous_partition(project: Path) -> None:
    """The previous partition's rows come from the ledger; inside one batch, from the staged
    partition before (published with it or not at all): the ledger has no 2025-03-02 when the
    batch below computes 2025-03-03, so without the staged rows the check would pass."""
    add_to_daily_header(project, AGAINST_PREVIOUS)
    redeploy(project)
    for day in ("2025-01-01", "2025-03-01"):
        ran = tidegate("run", MODEL, "--partition", day, "--project", project)
        assert ran.exit_code == 0, ran.stderr
    first = checks_of(show_partition(project, MODEL, "2025-01-01"))["against_previous"]
    assert (first["passed"], first["message"]) == (True, "no previous partition")

    result = backfill(project, MODEL, "--partitions", "2025-03-02..2025-03-04", "--batch-size", "3")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    for previous, day in [("2025-03-01", "2025-03-02"), ("2025-03-02", "2025-03-03")]:
        rows, before = day_rows(project, day), day_rows(project, previous)
        found = checks_of(show_partition(project, MODEL, day))["against_previous"]
        assert (found["passed"], found["measured"]) == (False, str(rows))
        assert found["message"] == (
            f"{rows} rows, {rows / before:.3g} of previous partition's {before} (max ratio 0.01)"
        )


def test_a_failing_blocking_freshness_check_keeps_the_published_partition(project: Path) -> None:
    day = "2025-01-02"
    assert tidegate("run", MODEL, "--partition", day, "--project", project).exit_code == 0
    before = show_partition(project, MODEL, day)
    warehouse_before = warehouse_dump(project)
    add_to_daily_header(project, STALE_BLOCKS)
    new_version = redeploy(project)

    result = tidegate("run", MODEL, "--partition", day, "--project", project)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    after = show_partition(project, MODEL, day)
    assert after["published"] == before["published"]
    last = after["last_attempt"]
    assert (last["state"], last["version_id"]) == ("failed", new_version)
    expected = f"newest {day} 00:00:00, expected at least {day} 23:00:00"
    assert f"check fresh_or_stop failed: {expected}" in last["error"]
    [failed] = [c for c in last["checks"] if not c["passed"]]
    assert (failed["name"], failed["kind"], failed["severity"]) == (
        "fresh_or_stop",
        "freshness",
        "blocking",
    )
    assert warehouse_dump(project) == warehouse_before
    assert_no_staging(project)


def test_a_failing_blocking_query_check_halts_the_backfill_and_keeps_the_old_rows(
    project: Path,
) -> None:
    first = backfill(project, MODEL, "--partitions", "2025-01-01..2025-01-04")
    assert first.exit_code == 0, first.stderr
    old = warehouse_rows(
        project, "SELECT * FROM daily_revenue WHERE order_date >= DATE '2025-01-03' ORDER BY ALL"
    )
    add_to_daily_header(project, LATE_DAYS_BLOCK)
    redeploy(project)

    result = backfill(project, MODEL, "--partitions", "2025-01-01..2025-01-04", "--json")
    assert result.exit_code == 1, (result.stdout, result.stderr)
    end = end_of(result)
    assert (end["trigger"]["name"], end["trigger"]["partition"]) == ("check_failure", "2025-01-03")
    run = show_run(project, end["run_id"])
    assert [(a["partition"], a["state"]) for a in run["attempts"]] == [
        ("2025-01-01", "published"),
        ("2025-01-02", "published"),
        ("2025-01-03", "failed"),
    ]
    assert run["attempts"][2]["failed_checks"] == ["nothing_after_jan_2"]
    # every row of the day violates: the count is the day's rows, as the old version wrote them
    rows = day_rows(project, "2025-01-03")
    assert (
        f"check nothing_after_jan_2 failed: {rows} row(s) violate it"
        in (run["attempts"][2]["error"])
    )
    assert (
        warehouse_rows(
            project,
            "SELECT * FROM daily_revenue WHERE order_date >= DATE '2025-01-03' ORDER BY ALL",
        )
        == old
    )
    assert_no_staging(project)


KEY_MODEL = """/* tidegate
grain = "key"
key_column = "status"
keys = ["completed", "cancelled"]

[columns]
status = "VARCHAR NOT NULL"
order_count = "BIGINT NOT NULL"

[[checks]]
name = "share_of_orders"
type = "row_count"
relative_to = "source"
source = "orders"
max_ratio = 0.0001
severity = "warn"

[[checks]]
name = "under_a_million"
type = "query"
sql = "SELECT status FROM this WHERE order_count < 1000000"
severity = "warn"
*/
SELECT status, count(*) AS order_count FROM orders WHERE status = $key GROUP BY status
"""


def test_key_list_partitions_measure_the_new_kinds_too(project: Path) -> None:
    """A key-list partition reads the whole source: a source-relative row count compares with
    all of its rows; a query check counts what it returns on the one partition."""
    (project / "models" / "by_status.sql").write_text(KEY_MODEL)
    assert tidegate("build", "--project", project).exit_code == 0
    assert tidegate("deploy", "by_status", "--project", project).exit_code == 0
    ran = tidegate("run", "by_status", "--partition", "completed", "--project", project)
    assert ran.exit_code == 0, (ran.stdout, ran.stderr)
    [(orders,)] = warehouse_rows(project, "SELECT count(*) FROM orders")
    found = checks_of(show_partition(project, "by_status", "completed"))
    share = found["share_of_orders"]
    assert (share["passed"], share["measured"]) == (False, "1")
    assert share["message"] == (
        f"1 rows, {1 / orders:.3g} of {orders:,} in source orders (max ratio 0.0001)"
    )
    query = found["under_a_million"]
    assert (query["passed"], query["measured"], query["message"]) == (
        False,
        "1",
        "1 row(s) violate it",
    )


NULLS_MODEL = """/* tidegate
grain = "day"
time_column = "order_date"
start = "2025-01-01"

[columns]
order_date = "DATE NOT NULL"
status = "VARCHAR NOT NULL"
refunded = "BIGINT"
last_refund = "BIGINT NOT NULL"
*/
SELECT CAST(order_ts AS DATE) AS order_date, status,
       CAST(NULLIF(count(*), count(*)) AS BIGINT) AS refunded,
       CAST(CASE WHEN CAST(order_ts AS DATE) = DATE '2025-01-02' AND status = 'cancelled'
                 THEN NULL ELSE 0 END AS BIGINT) AS last_refund
FROM orders WHERE order_ts >= $start AND order_ts < $end
GROUP BY CAST(order_ts AS DATE), status
"""


def test_nulls_in_a_not_null_column_break_the_contract_and_publish_nothing(
    project: Path,
) -> None:
    """NULLs are counted in the staging pass: a nullable column may hold them; a NOT NULL one
    fails the contract of its partition (and its batch), which then publishes nothing."""
    (project / "models" / "refunds.sql").write_text(NULLS_MODEL)
    assert tidegate("build", "--project", project).exit_code == 0
    assert tidegate("deploy", "refunds", "--project", project).exit_code == 0
    first = backfill(project, "refunds", "--partitions", "2025-01-01")
    assert first.exit_code == 0, first.stderr
    [(nulls,)] = warehouse_rows(project, "SELECT count(*) FROM refunds WHERE refunded IS NULL")
    assert nulls == day_rows_of(project, "refunds", "2025-01-01") > 0
    broken = backfill(project, "refunds", "--partitions", "2025-01-02", "--json")
    assert broken.exit_code == 1
    run = show_run(project, end_of(broken)["run_id"])
    [attempt] = run["attempts"]
    assert attempt["state"] == "failed"
    assert "column last_refund holds NULLs but is declared NOT NULL" in attempt["error"]
    assert day_rows_of(project, "refunds", "2025-01-02") == 0
    assert_no_staging(project)


def day_rows_of(project: Path, table: str, day: str) -> int:
    [(count,)] = warehouse_rows(
        project, f"SELECT count(*) FROM {table} WHERE order_date = CAST(? AS DATE)", [day]
    )
    return int(count)


# Every status a row names must be one the application knows (a table of its own, read as a
# source): `refunded` is not, so a day with a refunded order fails.
STATUS_KNOWN = """
[[checks]]
name = "status_known"
type = "relationships"
column = "status"
to = "known_statuses"
field = "name"
"""


def test_a_failing_relationships_check_blocks_the_publish(project: Path) -> None:
    warehouse_execute(
        project,
        "CREATE TABLE known_statuses AS SELECT name, TIMESTAMP '2020-01-01' AS since "
        "FROM (VALUES ('completed'), ('shipped'), ('cancelled')) AS known(name)",
    )
    settings = project / "tidegate.toml"
    settings.write_text(
        settings.read_text() + '\n[sources.known_statuses]\ntime_column = "since"\n'
    )
    add_to_daily_header(project, STATUS_KNOWN)
    redeploy(project)
    [(first_refund,)] = warehouse_rows(
        project, "SELECT min(CAST(order_ts AS DATE)) FROM orders WHERE status = 'refunded'"
    )
    day = first_refund.isoformat()
    result = backfill(project, MODEL, "--partitions", f"{day}..{day}", "--json")
    assert result.exit_code == 1, (result.stdout, result.stderr)
    run = show_run(project, end_of(result)["run_id"])
    [attempt] = run["attempts"]
    assert attempt["failed_checks"] == ["status_known"]
    [(refunded,)] = warehouse_rows(
        project,
        "SELECT count(DISTINCT status) FROM orders WHERE status = 'refunded' "
        "AND CAST(order_ts AS DATE) = CAST(? AS DATE)",
        [day],
    )
    # daily_revenue holds one row per day and status: the day's refunded row violates it
    assert f"check status_known failed: {refunded} row(s) violate it" in attempt["error"]
    assert attempt["state"] == "failed"


def test_a_relationships_check_to_an_unknown_table_is_refused_at_build(project: Path) -> None:
    add_to_daily_header(project, STATUS_KNOWN)
    built = tidegate("build", "--project", project)
    assert built.exit_code == 2
    [line] = built.stderr.strip().splitlines()
    assert "to: 'known_statuses' is not another model or a source" in line
    assert line.startswith("error: models/daily_revenue.sql:")
