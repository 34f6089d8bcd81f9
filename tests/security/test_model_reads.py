"""A SQL model reads only the tables it names. Calls that read a file, a table given as a
string, the engine's settings, or act on the server are refused at build (exit 2, one line
naming the file, the line and the function, nothing written) — and `deploy` and `run`, which
load the same project, refuse them alike. The DuckDB warehouse's connection reaches no file
either, should such a call ever get past the check."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines.postgres_kit import fresh_database, postgres_project
from tests.kit import state_dump, tidegate, warehouse_dump
from tidegate.domain.errors import EngineError
from tidegate.engines.duckdb import DuckDBEngine

COLUMNS = (
    "CAST(order_ts AS DATE) AS order_date, status, count(*) AS order_count, "
    "CAST(sum(gross_amount) AS DECIMAL(18, 2)) AS gross_revenue, "
    "CAST(sum(gross_amount - discount - refund) AS DECIMAL(18, 2)) AS net_revenue"
)
WINDOW = "WHERE order_ts >= $start AND order_ts < $end GROUP BY 1, 2"


def reading(extra: str) -> str:
    """daily_revenue's SELECT, joined (on its second line) with `extra`."""
    return f"SELECT {COLUMNS}\nFROM orders, {extra} {WINDOW}"


# what an outside review got past `build`, `deploy` and `run` on DuckDB
ESCAPES = {
    "enable_profiling": "enable_profiling(format := 'json', save_location := 'written.json')",
    "enable_logging": "enable_logging(storage := 'file', storage_path := 'written.log')",
    "query_table": "query_table('_tidegate.commit_markers')",
    "read_text": "read_text('/proc/self/environ')",
    "read_duckdb": "read_duckdb('warehouse.duckdb')",
    "glob": "glob('*')",
    "read_csv": "read_csv('/etc/passwd')",
    "query": "query('SELECT * FROM _tidegate.commit_markers')",
    "duckdb_settings": "duckdb_settings()",
    "sqlite_scan": "sqlite_scan('.tidegate/state.db', 'runs')",
}


def write_model(project: Path, name: str, sql: str) -> None:
    model = project / "models" / f"{name}.sql"
    text = model.read_text()
    model.write_text(text[: text.index("*/") + 2] + "\n" + sql + "\n")


def refused(project: Path, function: str, model: str = "daily_revenue") -> None:
    """Each command that loads the project refuses the model in one line, exit 2, and leaves
    the ledger, the warehouse and the project folder as they were."""
    before = (state_dump(project), warehouse_dump(project), sorted(os.listdir(project)))
    for command in (["build"], ["deploy", model], ["run", model, "--partition", "2025-03-01"]):
        result = tidegate(*command, "--project", project)
        assert result.exit_code == 2, (command, result.stdout, result.stderr)
        [line] = result.stderr.splitlines()
        assert line.startswith(f"error: models/{model}.sql:"), line
        assert f"function {function} is not allowed in a model" in line, line
    assert (state_dump(project), warehouse_dump(project), sorted(os.listdir(project))) == before


@pytest.mark.parametrize("call", list(ESCAPES.values()), ids=list(ESCAPES))
def test_a_call_reaching_outside_the_named_tables_is_refused(call: str, project: Path) -> None:
    write_model(project, "daily_revenue", reading(call))
    function = call.split("(")[0]
    refused(project, function)
    line = tidegate("build", "--project", project).stderr
    assert line.startswith("error: models/daily_revenue.sql:"), line
    # the call is on the SELECT's second line: the error points at it, not at the header
    sql_start = (project / "models" / "daily_revenue.sql").read_text().index("SELECT")
    text = (project / "models" / "daily_revenue.sql").read_text()
    assert line.split(":")[2] == str(text[:sql_start].count("\n") + 2), line


def test_reading_an_upstream_model_by_string_is_refused(project: Path) -> None:
    """`query_table('daily_revenue')` would read an upstream without lineage: a later taint
    of daily_revenue would never reach this model."""
    write_model(
        project,
        "monthly_revenue",
        "SELECT CAST(date_trunc('month', order_date) AS DATE) AS month, status,\n"
        "  sum(order_count) AS order_count, sum(gross_revenue) AS gross_revenue,\n"
        "  sum(net_revenue) AS net_revenue\n"
        "FROM query_table('daily_revenue')\n"
        "WHERE order_date >= $start AND order_date < $end GROUP BY 1, 2",
    )
    refused(project, "query_table", "monthly_revenue")


def test_calls_hidden_in_a_subquery_a_cte_or_a_lateral_are_refused(project: Path) -> None:
    for sql in (
        reading("(SELECT 1 FROM (SELECT content FROM read_text('/etc/hostname')) AS inner_read)"),
        f"WITH leak AS (SELECT * FROM glob('*')) SELECT {COLUMNS}\nFROM orders, leak {WINDOW}",
        reading("LATERAL read_blob('/etc/hostname') AS blob"),
        f"SELECT {COLUMNS}, current_setting('threads') AS threads\nFROM orders {WINDOW}",
    ):
        write_model(project, "daily_revenue", sql)
        result = tidegate("build", "--project", project)
        assert result.exit_code == 2, (sql, result.stderr)
        assert "is not allowed in a model" in result.stderr, result.stderr


def test_row_generators_and_ordinary_functions_are_allowed(project: Path) -> None:
    """The check refuses by name what reaches outside: a model using range, generate_series,
    unnest and everyday functions builds and publishes."""
    write_model(
        project,
        "daily_revenue",
        f"SELECT {COLUMNS}\nFROM orders, range(1) AS one(i), generate_series(1, 1) AS g(j),\n"
        "  unnest([1]) AS u(k)\n"
        "WHERE order_ts >= $start AND order_ts < $end AND lower(status) = status\n"
        "  AND coalesce(i, 0) + j + k = 2 GROUP BY 1, 2",
    )
    for command in (["build"], ["validate", "daily_revenue"], ["deploy", "daily_revenue"]):
        result = tidegate(*command, "--project", project)
        assert result.exit_code == 0, (command, result.stderr)
    ran = tidegate("run", "daily_revenue", "--partition", "2025-03-01", "--project", project)
    assert ran.exit_code == 0, ran.stderr


HEADER_SQL = {
    "an expression check": (
        '[[checks]]\ntype = "expression"\n'
        "expression = \"length(current_setting('threads')) > 0\"\n",
        "checks[3]: expression function current_setting is not allowed in a check",
    ),
    "a query check": (
        '[[checks]]\ntype = "query"\n'
        "sql = \"SELECT order_date FROM this, read_text('/etc/hostname')\"\n",
        "function read_text is not allowed in a check",
    ),
    "a reconciliation": (
        '[[reconciliations]]\nname = "leak"\nsource = "orders"\n'
        "source_expression = \"sum(length(current_setting('threads')))\"\n"
        'target_expression = "sum(order_count)"\n',
        "source_expression function current_setting is not allowed in a reconciliation",
    ),
}


@pytest.mark.parametrize("toml, message", list(HEADER_SQL.values()), ids=list(HEADER_SQL))
def test_sql_in_a_header_is_held_to_the_same_rule(toml: str, message: str, project: Path) -> None:
    model = project / "models" / "daily_revenue.sql"
    text = model.read_text()
    end = text.index("*/")
    model.write_text(text[:end] + toml + text[end:])
    before = state_dump(project)
    result = tidegate("build", "--project", project)
    assert result.exit_code == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("error: models/daily_revenue.sql:"), line
    assert message in line, line
    assert state_dump(project) == before


def test_the_duckdb_warehouse_reaches_no_file(project: Path) -> None:
    """Defence in depth: SQL run on the warehouse's own connection cannot read a file, glob a
    folder, attach a database or write a profile, whatever the check above let through."""
    engine = DuckDBEngine(project / "warehouse.duckdb")
    try:
        for statement in (
            "SELECT * FROM read_text('/etc/hostname')",
            "SELECT * FROM glob('*')",
            "ATTACH 'elsewhere.duckdb' AS elsewhere",
            "COPY (SELECT 1) TO 'written.csv'",
        ):
            with pytest.raises(EngineError, match="disabled by configuration"):
                engine._run(statement)
        assert engine._run("SELECT count(*) FROM orders").fetchone()[0] > 0
    finally:
        engine.close()
    assert not (project / "written.csv").exists()
    assert not (project / "elsewhere.duckdb").exists()


@pytest.fixture
def postgres_warehouse(tmp_path: Path) -> Iterator[Path]:
    with fresh_database() as dsn:
        yield postgres_project(tmp_path / "project", dsn, rows_per_day=2)


@pytest.mark.postgres
@pytest.mark.parametrize(
    "call, function",
    [
        ("(SELECT lo_from_bytea(0, 'written') AS oid) AS lo", "lo_from_bytea"),
        ("(SELECT pg_read_file('postgresql.conf') AS conf) AS conf", "pg_read_file"),
        ("(SELECT pg_catalog.pg_ls_dir('.') AS f) AS listing", "pg_ls_dir"),
        ("(SELECT set_config('work_mem', '1GB', false) AS s) AS s", "set_config"),
        ("(SELECT query_to_xml('SELECT 1', true, true, '') AS x) AS x", "query_to_xml"),
        ("(SELECT * FROM dblink('dbname=test', 'SELECT 1') AS t(a int)) AS remote", "dblink"),
        ("(SELECT pg_advisory_lock(1) AS held) AS held", "pg_advisory_lock"),
    ],
)
def test_server_side_functions_are_refused_on_postgres(
    call: str, function: str, postgres_warehouse: Path
) -> None:
    write_model(postgres_warehouse, "daily_revenue", reading(call))
    before = state_dump(postgres_warehouse)
    for command in (["build"], ["run", "daily_revenue", "--partition", "2025-03-01"]):
        result = tidegate(*command, "--project", postgres_warehouse)
        assert result.exit_code == 2, (command, result.stderr)
        [line] = result.stderr.splitlines()
        assert f"function {function} is not allowed in a model" in line, line
    assert state_dump(postgres_warehouse) == before


def test_a_version_stored_before_the_rules_is_held_to_them_when_it_runs(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version built by a tidegate without these rules (here: built with the check switched
    off) keeps its SQL in the ledger; running it, a rollback or a backfill, is refused too."""
    import tidegate.sql.model_sql as model_sql

    clean = (project / "models" / "daily_revenue.sql").read_text()
    write_model(project, "daily_revenue", reading("query_table('monthly_revenue') AS leak"))
    with monkeypatch.context() as switched_off:
        switched_off.setattr(model_sql, "refused_call", lambda tree: None)
        for command in (["build"], ["deploy", "daily_revenue", "--force", "--reason", "old"]):
            result = tidegate(*command, "--project", project)
            assert result.exit_code == 0, (command, result.stderr)
    (project / "models" / "daily_revenue.sql").write_text(clean)
    before = holding_rows(project)
    ran = tidegate("run", "daily_revenue", "--partition", "2025-03-01", "--project", project)
    assert ran.exit_code != 0, ran.stdout
    assert "function query_table is not allowed in a model" in ran.stdout + ran.stderr
    backfill = tidegate(
        "backfill", "daily_revenue", "--partitions", "2025-03-01..2025-03-02", "--project", project
    )
    assert backfill.exit_code == 3, backfill.stderr
    assert "function query_table is not allowed in a model" in backfill.stderr
    assert holding_rows(project) == before


def holding_rows(project: Path) -> dict[str, list[tuple[object, ...]]]:
    """The warehouse's tables that hold rows (a session may create tidegate's empty ones)."""
    return {name: rows for name, rows in warehouse_dump(project).items() if rows}
