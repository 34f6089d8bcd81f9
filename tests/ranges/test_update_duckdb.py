"""The migration backfill on the embedded default (DuckDB, one writer): an update model fills a
new column of `orders` in key ranges — dry run, backfill, audit results, rerun judgment,
idempotence — and every kind of bad input is one line, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.backfill_kit import backfill_run_ids
from tests.faults.ledger import assert_ledger_matches_markers, ledger_rows
from tests.kit import FORCED, run_process, state_dump, tidegate, tidegate_events, warehouse_rows
from tests.ops.test_json_schemas import schema_name, validator
from tests.ranges.range_kit import (
    DIFFERING,
    EXPRESSION,
    MODEL,
    add_model,
    duckdb_project,
    model_text,
)
from tidegate.crash import ENVIRONMENT_VARIABLE

pytestmark = pytest.mark.duckdb

ROWS_PER_DAY = 20  # 7,300 orders, order_id 1..7300
CHUNK = 500  # 15 chunks: 0..7000
CHUNKS = 15


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return duckdb_project(tmp_path / "shop", ROWS_PER_DAY, CHUNK)


def differing(project: Path) -> int:
    [(count,)] = warehouse_rows(project, DIFFERING)
    return int(count)


def test_a_dry_run_counts_the_chunks_and_writes_nothing(project: Path) -> None:
    before = state_dump(project)
    result = tidegate(
        "backfill",
        MODEL,
        "--partitions",
        "all",
        "--rate",
        "120/min",
        "--dry-run",
        "--json",
        "--project",
        project,
    )
    assert result.exit_code == 0, result.stderr
    plan = result.json()
    assert (plan["partitions"], plan["batches"], plan["ranges"]) == (CHUNKS, CHUNKS, ["0..7000"])
    assert plan["update"]["rows"] == 7300
    assert plan["update"]["rows_per_chunk"]["0"] == 499  # order_id 1..499
    assert plan["update"]["rows_per_chunk"]["500"] == 500
    # 15 batch starts at 120 a minute: 14 pauses of half a second
    assert plan["estimated_seconds"] == 7.0
    assert state_dump(project) == before
    assert differing(project) == 7300


def test_the_backfill_fills_every_chunk_audited_in_its_transaction(project: Path) -> None:
    result = tidegate(
        "backfill",
        MODEL,
        "--partitions",
        "all",
        "--batch-size",
        "2",
        "--json",
        "--project",
        project,
    )
    assert result.exit_code == 0, result.stderr + result.stdout
    assert differing(project) == 0
    assert assert_ledger_matches_markers(project, MODEL) == CHUNKS
    [run_id] = backfill_run_ids(project)
    run = tidegate("show", "run", run_id, "--json", "--project", project).json()
    assert run["plan"]["requested"] == "0..7000"  # `all` as resolved, kept for resume
    assert run["plan"]["chunk_size"] == CHUNK
    assert {a["state"] for a in run["attempts"]} == {"published"}
    assert all(r["passed"] for a in run["attempts"] for r in a["reconciliations"])

    shown = tidegate("show", "partition", MODEL, "3500", "--json", "--project", project)
    assert shown.exit_code == 0, shown.stderr
    document = shown.json()["published"]
    assert document["rows"] == 500
    [reconciled] = document["reconciliations"]
    assert (reconciled["source_value"], reconciled["target_value"]) == ("500", "500")
    checks = {c["name"]: c for c in document["checks"]}
    assert checks["net_not_above_gross"]["passed"]
    assert checks["updated"]["measured"] == "500"

    status = tidegate("status", MODEL, "--json", "--project", project).json()
    assert status["models"][0]["partitions"]["published"] == CHUNKS

    # again: idempotent, and nothing left to change in any range (`run` takes ranges too)
    ran = tidegate("run", MODEL, "--partition", "1000..1500", "--project", project)
    assert ran.exit_code == 0, ran.stderr
    again = tidegate("backfill", MODEL, "--partitions", "0..1000", "--project", project)
    assert again.exit_code == 0, again.stderr
    [latest] = ledger_rows(
        project,
        "SELECT c.measured FROM check_results AS c JOIN partitions AS p "
        "ON p.attempt_id = c.attempt_id WHERE p.model = ? AND p.partition_start = 500 "
        "AND c.name = 'updated'",
        (MODEL,),
    )
    assert latest == ("0",)

    judged = tidegate(
        "rerun",
        run_id,
        "--partitions",
        "0..1000",
        "--dry-run",
        "--json",
        "--project",
        project,
    )
    assert judged.exit_code in (0, 3), judged.stderr
    verdicts = judged.json()["judgment"]
    assert [p["verdict"] for p in verdicts] == ["safe", "safe", "safe"]
    assert all("update sets each row" in p["reason"] for p in verdicts)


@pytest.mark.crash
@pytest.mark.slow
def test_kills_at_seeded_points_then_resume_fill_every_row_once(project: Path) -> None:
    backfill = ("backfill", MODEL, "--partitions", "all", "--json", "--project", project)
    killed = run_process(*backfill, env={ENVIRONMENT_VARIABLE: "before_publish:3"})
    assert killed.exit_code == -9, killed.stderr
    [run_id] = backfill_run_ids(project)
    for point in ("after_publish:4", "after_ledger:2"):
        killed = run_process(
            "backfill",
            "resume",
            run_id,
            "--project",
            project,
            env={ENVIRONMENT_VARIABLE: point},
        )
        assert killed.exit_code == -9, killed.stderr
    done = run_process("backfill", "resume", run_id, "--project", project)
    assert done.exit_code == 0, done.stderr
    assert differing(project) == 0
    assert assert_ledger_matches_markers(project, MODEL) == CHUNKS


def _refused(project: Path, *args: str, message: str) -> None:
    before = state_dump(project)
    result = tidegate(*args, "--project", project)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert state_dump(project) == before
    assert differing(project) == 7300


@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        ("abc", "'abc' is not a key"),
        ("250..1000", "not the first key of a chunk of 500"),
        ("1000..0", "ends before it starts"),
    ],
)
def test_bad_ranges_are_refused(project: Path, partitions: str, message: str) -> None:
    _refused(project, "backfill", MODEL, "--partitions", partitions, message=message)


def test_bad_flags_are_refused(project: Path) -> None:
    _refused(
        project,
        "backfill",
        MODEL,
        "--partitions",
        "all",
        "--lock-timeout",
        "soon",
        message="--lock-timeout 'soon'",
    )
    assert tidegate("deploy", "daily_revenue", "--project", project).exit_code == 0
    _refused(
        project,
        "backfill",
        "daily_revenue",
        "--partitions",
        "2025-01-01",
        "--statement-timeout",
        "1s",
        message="are for update models",
    )


def _declare(project: Path, name: str, text: str) -> None:
    (project / "models" / f"{name}.toml").write_text(text)


def test_a_missing_column_or_a_text_key_is_refused_before_anything_runs(project: Path) -> None:
    _declare(project, "orders_margin", model_text(CHUNK).replace("net_revenue =", "net_margin ="))
    assert tidegate("build", "--project", project).exit_code == 0
    # the deploy's preflight sees it first; forced past it, the backfill refuses it too
    refused = tidegate("deploy", "orders_margin", "--project", project)
    assert refused.exit_code == 3
    assert "table orders has no column net_margin" in refused.stderr
    assert tidegate("deploy", "orders_margin", *FORCED, "--project", project).exit_code == 0
    _refused(
        project,
        "backfill",
        "orders_margin",
        "--partitions",
        "all",
        message="table orders has no column net_margin; nothing was written",
    )
    text_key = model_text(CHUNK).replace('key_column = "order_id"', 'key_column = "status"')
    _declare(project, "orders_by_status", text_key)
    assert tidegate("build", "--project", project).exit_code == 0
    assert tidegate("deploy", "orders_by_status", *FORCED, "--project", project).exit_code == 0
    _refused(
        project,
        "backfill",
        "orders_by_status",
        "--partitions",
        "all",
        message="key column status is TEXT, not an integer",
    )


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('grain = "range"', 'grain = "day"', 'an update model runs by key ranges: grain = "range"'),
        ("chunk_size = 500", "chunk_size = 0", "chunk_size"),
        (
            "net_revenue = ",
            'net_revenue = "sum(gross_amount)"\nunused = ',
            "is an aggregate or window",
        ),
        ('table = "orders"', 'table = "orders; DROP TABLE orders"', "not a plain identifier"),
        (EXPRESSION, "gross_amount * random()", "calls RANDOM(), whose value is not the row's"),
        (EXPRESSION, "CAST(now() AS DATE) - order_ts", "calls now(), whose value is not"),
        (EXPRESSION, "nextval('order_seq')", "calls nextval(), whose value is not"),
        ("chunk_size = 500", 'chunk_size = 500\nunique_key = ["order_id"]', "unique_key: not for"),
    ],
)
def test_bad_declarations_stop_the_build(project: Path, old: str, new: str, message: str) -> None:
    text = model_text(CHUNK)
    assert old in text
    _declare(project, "orders_bad", text.replace(old, new))
    _refused(project, "build", message=message)


def test_write_mode_update_in_an_sql_model_says_where_it_belongs(project: Path) -> None:
    path = project / "models" / "daily_revenue.sql"
    path.write_text(
        path.read_text().replace('grain = "day"', 'grain = "day"\nwrite_mode = "update"')
    )
    _refused(project, "build", message="write_mode: update fills columns of an existing table")


def test_an_update_model_is_not_validated_diffed_distributed_or_tainted(project: Path) -> None:
    _refused(project, "validate", MODEL, "--sample", "1", message="is an update model")
    _refused(project, "diff", MODEL, "--left", "v1", "--right", "v1", message="is an update model")
    _refused(
        project,
        "backfill",
        MODEL,
        "--partitions",
        "all",
        "--distributed",
        message="--distributed does not run those yet",
    )


def test_a_chunk_size_change_is_a_new_version(project: Path) -> None:
    add_model(project, 1000)
    dry = tidegate(
        "backfill", MODEL, "--partitions", "all", "--dry-run", "--json", "--project", project
    )
    assert dry.json()["partitions"] == 8


def test_the_adaptive_throttle_slows_down_and_says_why_in_every_output(project: Path) -> None:
    """A latency bound no batch can meet: each batch halves the rate, and each change is an
    event of the progress stream, a history event and a line of `show run`; every document
    matches its schema."""
    result = tidegate_events(
        "backfill",
        MODEL,
        "--partitions",
        "0..1500",
        "--rate",
        "6000/min",
        "--max-batch-latency",
        "1ms",
        "--json",
        "--project",
        project,
    )
    assert result.exit_code == 0, result.stderr
    events = list(result.events)
    throttled = [e for e in events if e["event"] == "throttle"]
    assert [e["rate_after"] for e in throttled] == [3000.0, 1500.0, 750.0, 375.0]
    assert throttled[0]["rate_before"] is None
    assert "above the 0.001s bound: slowed from full speed to 3000/min" in throttled[0]["reason"]
    [run_id] = backfill_run_ids(project)
    run = tidegate("show", "run", run_id, "--json", "--project", project).json()
    assert [t["rate_after"] for t in run["throttle"]] == [3000.0, 1500.0, 750.0, 375.0]
    assert run["plan"]["max_batch_latency"] == 0.001
    shown = tidegate("show", "run", run_id, "--project", project)
    assert "throttle at" in shown.stdout and "slowed from 3000/min to 1500/min" in shown.stdout
    history = tidegate("history", MODEL, "--json", "--project", project).json()
    assert [e["kind"] for e in history["events"]].count("throttle") == 4
    documents = [
        *events,
        result.json(),
        run,
        history,
        tidegate("show", "partition", MODEL, "500", "--json", "--project", project).json(),
        tidegate(
            "backfill", MODEL, "--partitions", "all", "--dry-run", "--json", "--project", project
        ).json(),
        tidegate("status", "--json", "--project", project).json(),
        tidegate("report", "--out", project / "report.html", "--json", "--project", project).json(),
        tidegate(
            "rerun", run_id, "--partitions", "0", "--dry-run", "--json", "--project", project
        ).json(),
    ]
    for document in documents:
        errors = list(validator(schema_name(document)).iter_errors(document))
        assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]


def test_a_failing_check_rolls_the_range_back_and_halts_the_backfill(project: Path) -> None:
    """The audit runs after the UPDATE in its transaction: a blocking check that fails rolls
    the range back (nothing written) and fires the stop-loss there."""
    text = model_text(CHUNK).replace("net_revenue <= gross_amount", "net_revenue < 0")
    (project / "models" / f"{MODEL}.toml").write_text(text)
    assert tidegate("build", "--project", project).exit_code == 0
    assert tidegate("deploy", MODEL, "--project", project).exit_code == 0
    result = tidegate_events(
        "backfill", MODEL, "--partitions", "all", "--json", "--project", project
    )
    assert result.exit_code == 1
    end = result.json()
    assert (end["trigger"]["name"], end["trigger"]["partition"]) == ("check_failure", "0")
    [failed_range] = [e for e in result.events if e["event"] == "partition"]
    assert failed_range["reason"] == (
        "range 0: check net_not_above_gross failed: 499 of 499 rows; nothing was written"
    )
    assert differing(project) == 7300
    shown = tidegate("show", "partition", MODEL, "0", "--json", "--project", project).json()
    [failed] = [c for c in shown["last_attempt"]["checks"] if not c["passed"]]
    assert (failed["name"], failed["measured"]) == ("net_not_above_gross", "499")


def test_an_update_model_of_a_models_table_stops_the_build(project: Path) -> None:
    """A model's table is tidegate's: rewriting its partitions in place would bypass the gates
    and leave markers and checksums that no longer describe it."""
    assert tidegate("deploy", "daily_revenue", "--project", project).exit_code == 0
    text = (
        model_text(CHUNK)
        .replace('table = "orders"', 'table = "daily_revenue"')
        .replace('key_column = "order_id"', 'key_column = "order_count"')
    )
    _declare(project, "revenue_zeroed", text.split("[[checks]]")[0])
    _refused(
        project,
        "build",
        message="table: 'daily_revenue' is the table of model daily_revenue, which tidegate "
        "publishes",
    )


def test_a_model_reading_an_update_model_stops_the_build(project: Path) -> None:
    (project / "models" / "orders_per_day.sql").write_text(
        '/* tidegate\ngrain = "day"\ntime_column = "d"\nstart = "2025-01-01"\n[columns]\n'
        'd = "DATE NOT NULL"\nn = "BIGINT NOT NULL"\n*/\n'
        f"SELECT CAST(order_ts AS DATE) AS d, count(*) AS n FROM {MODEL}\n"
        "WHERE order_ts >= $start AND order_ts < $end GROUP BY 1\n"
    )
    _refused(
        project,
        "build",
        message=f"reads '{MODEL}', an update model, which publishes no table of its own: read "
        "the table 'orders' as a source",
    )


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "gross_amount - nosuch",
            "[set] or checks cannot run on table orders: duckdb: Binder Error",
        ),
        ("'abc'", "[set] or checks cannot run on table orders: duckdb: Conversion Error"),
    ],
)
def test_an_expression_that_does_not_bind_to_the_table_is_refused_before_anything_runs(
    project: Path, expression: str, message: str
) -> None:
    """The expressions are bound to the table and computed on one of its rows at deploy and
    before the backfill starts: exit 2, nothing written, no failed run."""
    _declare(project, "orders_bad", model_text(CHUNK).replace(f'"{EXPRESSION}"', f'"{expression}"'))
    assert tidegate("build", "--project", project).exit_code == 0
    refused = tidegate("deploy", "orders_bad", "--project", project)
    assert refused.exit_code == 3
    assert message in refused.stderr
    assert tidegate("deploy", "orders_bad", *FORCED, "--project", project).exit_code == 0
    _refused(project, "backfill", "orders_bad", "--partitions", "all", message=message)


def test_rows_with_a_null_key_refuse_the_backfill_before_anything_runs(project: Path) -> None:
    """A row whose key is NULL is in no key range: a backfill would report every range done
    and leave it unset, so it does not start while one exists."""
    import duckdb

    con = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        con.execute(
            "INSERT INTO orders SELECT * REPLACE (NULL AS order_id) FROM orders WHERE order_id = 1"
        )
    finally:
        con.close()
    before = state_dump(project)
    result = tidegate("backfill", MODEL, "--partitions", "all", "--project", project)
    assert result.exit_code == 2, result.stderr
    assert (
        "key column order_id is NULL in 1 row of orders: no key range holds them" in result.stderr
    )
    assert len(result.stderr.strip().splitlines()) == 1
    assert state_dump(project) == before
    assert differing(project) == 7301


def test_a_batch_of_ranges_publishes_range_by_range_up_to_the_first_refused(
    project: Path,
) -> None:
    """--batch-size 3 is three transactions: the first range's commits before the second is
    refused by its check, and the third is not tried."""
    text = model_text(CHUNK).replace(
        "net_revenue <= gross_amount", "net_revenue <= gross_amount AND order_id < 500"
    )
    (project / "models" / f"{MODEL}.toml").write_text(text)
    assert tidegate("build", "--project", project).exit_code == 0
    assert tidegate("deploy", MODEL, "--project", project).exit_code == 0
    result = tidegate_events(
        "backfill",
        MODEL,
        "--partitions",
        "0..1000",
        "--batch-size",
        "3",
        "--json",
        "--project",
        project,
    )
    assert result.exit_code == 1
    events = result.events
    states = {
        e["partition"]: (e["state"], e.get("reason")) for e in events if e["event"] == "partition"
    }
    assert states == {
        "0": ("published", None),
        "500": (
            "failed",
            "range 500: check net_not_above_gross failed: 500 of 500 rows; nothing was written",
        ),
        "1000": ("failed", "not published: 500 in the same batch failed"),
    }
    assert differing(project) == 7300 - 499


@pytest.mark.crash
def test_a_row_given_a_null_key_before_a_resume_is_refused_until_it_has_one(
    project: Path,
) -> None:
    """The backfill refuses to start while rows with a NULL key exist, and so does its resume
    when one was written after the run was cut short (the warehouse is locked while a run
    goes on; PostgreSQL's concurrent case is test_update_postgres.py's): the run stays
    resumable; given a key, the row is filled by a backfill of its chunk."""
    import duckdb

    backfill = ("backfill", MODEL, "--partitions", "all", "--project", project)
    killed = run_process(*backfill, env={ENVIRONMENT_VARIABLE: "before_publish:3"})
    assert killed.exit_code == -9, killed.stderr
    [run_id] = backfill_run_ids(project)
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        con.execute(
            "INSERT INTO orders SELECT * REPLACE (NULL AS order_id) FROM orders "
            "WHERE order_id = 7000"
        )
    finally:
        con.close()
    left = differing(project)
    resumed = tidegate("backfill", "resume", run_id, "--project", project)
    assert resumed.exit_code == 3, resumed.stderr
    [line] = resumed.stderr.splitlines()
    assert "cannot run against the warehouse as it is now, nothing started" in line, line
    assert "key column order_id is NULL in 1 row of orders" in line, line
    assert differing(project) == left
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    try:
        con.execute("UPDATE orders SET order_id = 9000 WHERE order_id IS NULL")
    finally:
        con.close()
    finished = tidegate("backfill", "resume", run_id, "--project", project)
    assert finished.exit_code == 0, finished.stderr
    done = tidegate("backfill", MODEL, "--partitions", "9000", "--project", project)
    assert done.exit_code == 0, done.stderr
    assert differing(project) == 0
