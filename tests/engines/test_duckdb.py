"""DuckDB, the embedded default warehouse: the Engine contract plus what only DuckDB has — one
writing process per file (docs/design.md §7)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.engines.contract import DAY1_ROWS, EVENT_COLUMNS, EngineContract, select_rows
from tests.kit import FORCED, tidegate, warehouse_rows
from tidegate.domain import checksum as checksum_rules
from tidegate.domain.checksum import MODULUS, Checksum
from tidegate.domain.errors import BusyError, EngineError
from tidegate.domain.model import CheckSpec, Severity
from tidegate.domain.partitions import Grain, parse_partition
from tidegate.engines.base import Engine
from tidegate.engines.duckdb import PARSED_KEPT, DuckDBEngine, textual_columns
from tidegate.engines.sql_queries import LISTED_ROWS
from tidegate.sql import statements as sql

HOLDER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("CREATE TABLE IF NOT EXISTS held (n INTEGER)")
print("ready", flush=True)
sys.stdin.read()
con.close()
"""

OPENER = """
import sys, duckdb
try:
    duckdb.connect(sys.argv[1]).close()
except duckdb.IOException:
    sys.exit(4)
"""


class TestDuckDB(EngineContract):
    @pytest.fixture
    def engine(self, tmp_path: Path) -> Iterator[Engine]:
        opened = DuckDBEngine(tmp_path / "warehouse.duckdb")
        try:
            yield opened
        finally:
            opened.close()

    def test_name_and_capabilities(self, engine: Engine) -> None:
        assert engine.name == "duckdb"
        assert engine.capabilities.transactional_publish
        assert engine.capabilities.single_writer_process
        assert engine.version() == duckdb.__version__


# --- the checksum, against an XOR of the very same row hashes ------------------------------------


def python_row_hash(values: tuple[str | None, ...]) -> int:
    """The documented row hash, computed in Python: the oracle for the engine's SQL."""
    return checksum_rules.row_hash(values)


@pytest.fixture
def duck(tmp_path: Path) -> Iterator[DuckDBEngine]:
    opened = DuckDBEngine(tmp_path / "warehouse.duckdb")
    opened.prepare()
    try:
        yield opened
    finally:
        opened.close()


def stage_texts(engine: DuckDBEngine, name: str, rows: list[tuple[str, str]]) -> None:
    values = ", ".join(f"('{a}', '{b}')" for a, b in rows)
    engine.stage(name, f"SELECT * FROM (VALUES {values}) AS t(a, b)", {})


def xor_of_row_hashes(engine: DuckDBEngine, name: str) -> int:
    hashed = sql.row_hash(["a", "b"]).sql(dialect=sql.DIALECT)
    staged = sql.staged(name).sql(dialect=sql.DIALECT)
    query = f"SELECT coalesce(bit_xor({hashed}), 0) FROM {staged}"
    return int(engine._con.execute(query).fetchone()[0])


def test_a_duplicated_pair_cancels_in_xor_but_not_in_the_checksum(duck: DuckDBEngine) -> None:
    r1, r2, r3 = ("1", "a"), ("2", "b"), ("3", "c")
    stage_texts(duck, "t1", [r1])
    stage_texts(duck, "t2", [r1, r2, r2])
    stage_texts(duck, "t3", [r1, r3, r3])

    xors = {name: xor_of_row_hashes(duck, name) for name in ("t1", "t2", "t3")}
    assert xors["t1"] == xors["t2"] == xors["t3"] == python_row_hash(r1)

    sums = {name: duck.checksum(name, ["a", "b"]) for name in ("t1", "t2", "t3")}
    assert sums["t1"] != sums["t2"]
    assert sums["t2"] != sums["t3"]
    assert sums["t2"].rows == sums["t3"].rows == 3


def test_the_checksum_is_the_sum_of_row_hashes_mod_2_64(duck: DuckDBEngine) -> None:
    rows = [("1", "a"), ("2", "b"), ("2", "b"), ("x\u00e9", "\u2603")]
    stage_texts(duck, "t", rows)
    expected = sum(python_row_hash(r) for r in rows) % MODULUS
    assert duck.checksum("t", ["a", "b"]) == Checksum(len(rows), expected)


def test_the_checksum_does_not_overflow(duck: DuckDBEngine) -> None:
    """Many large 64-bit hashes summed past 2^64 still give a digest below 2^64."""
    duck.stage("big", "SELECT CAST(i AS VARCHAR) AS a, 'x' AS b FROM range(5000) AS r(i)", {})
    found = duck.checksum("big", ["a", "b"])
    expected = sum(python_row_hash((str(i), "x")) for i in range(5000)) % MODULUS
    assert found == Checksum(5000, expected)


@pytest.mark.parametrize("rows", [LISTED_ROWS, LISTED_ROWS + 1])
def test_a_profile_digests_few_or_many_staged_rows_alike(duck: DuckDBEngine, rows: int) -> None:
    """Up to LISTED_ROWS staged rows are digested in Python from their values as text, more in
    DuckDB: either way each day's checksum is the documented sum of its row hashes (NULLs,
    accents, a combining mark and an emoji included)."""
    texts = ["x", "\u00e9t\u00e9", "e\u0301", "\U0001f600", None, "n", "v1:n"]
    staged = [
        (
            f"2025-01-0{1 + i % 3} {i % 24:02d}:00:00",
            texts[i % len(texts)],
            None if i % 5 == 0 else str(i),
        )
        for i in range(rows)
    ]
    values = ", ".join(
        f"(TIMESTAMP '{ts}', {'NULL' if a is None else repr(a)}, "
        f"{'NULL' if b is None else repr(b)})"
        for ts, a, b in staged
    )
    duck.stage(
        "mixed",
        f"SELECT ts, CAST(a AS VARCHAR) AS a, CAST(b AS VARCHAR) AS b FROM (VALUES {values}) "
        "AS t(ts, a, b)",
        {},
    )
    profiles = duck.profile("mixed", True, "ts", "day", None, ["ts", "a", "b"])
    by_day: dict[int, list[tuple[str | None, ...]]] = {}
    for row in staged:
        day = parse_partition(row[0][:10], Grain.DAY).start
        by_day.setdefault(day, []).append(row)
    assert {day: p.checksum for day, p in profiles.items()} == {
        day: Checksum(len(day_rows), sum(python_row_hash(r) for r in day_rows) % MODULUS)
        for day, day_rows in by_day.items()
    }
    # the path the row count chose (the listing statement is cached under its own key)
    listed = {key[-1] for key in duck._statements if key[0] == "profile"}
    assert listed == {rows <= LISTED_ROWS}


def test_only_columns_without_a_collation_of_exact_types_are_textual() -> None:
    definition = (
        'CREATE TABLE t(k INTEGER, "a b" VARCHAR, nocase VARCHAR COLLATE NOCASE, '
        "d DECIMAL(18,2), f DOUBLE, r REAL, i INTERVAL, ts TIMESTAMP, tz TIMESTAMP WITH TIME "
        "ZONE, day DATE, flag BOOLEAN, id UUID, l INTEGER[], s STRUCT(x INTEGER));"
    )
    assert textual_columns(definition) == {"k", "a b", "d", "ts", "day", "flag", "id"}
    # a definition sqlglot cannot read leaves every key to DuckDB
    assert textual_columns("CREATE TABLE t(k INTEGER, x SOME NEW TYPE(()))") == frozenset()


def test_a_few_staged_rows_count_repeated_keys_as_duckdb_compares_them(
    duck: DuckDBEngine,
) -> None:
    """A unique check over a few staged rows is counted from their texts only where equal texts
    mean equal values: 'a' and 'A' under NOCASE, and -0.0 and 0.0, are one key to DuckDB."""
    duck.stage(
        "keys",
        "SELECT CAST(ts AS TIMESTAMP) AS ts, plain, folded COLLATE NOCASE AS folded, "
        "CAST(number AS DOUBLE) AS number FROM (VALUES "
        "('2025-01-01 01:00:00', 'a', 'a', '0.0'), ('2025-01-01 02:00:00', 'a', 'A', '-0.0'), "
        "('2025-01-01 03:00:00', 'b', 'b', '1.0'), ('2025-01-02 01:00:00', 'b', 'B', '1.0')) "
        "AS t(ts, plain, folded, number)",
        {},
    )
    checks = [
        CheckSpec(f"{name}_once", "unique", Severity.BLOCKING, {"columns": [name]})
        for name in ("plain", "folded", "number")
    ]
    profiles = duck.profile(
        "keys", True, "ts", "day", None, ["ts", "plain", "folded", "number"], checks
    )
    first, second = (parse_partition(d, Grain.DAY).start for d in ("2025-01-01", "2025-01-02"))
    # one repeated key on the first day for each check, as DuckDB's own GROUP BY counts
    assert profiles[first].measured == (1, 1, 1)
    assert profiles[second].measured == (0, 0, 0)
    assert [duck.measure(c, "keys", {}) for c in checks] == [2, 2, 2]


def test_staging_never_reaches_the_warehouse_file(tmp_path: Path) -> None:
    """Staged rows live in memory: another reader of the file sees only what was published."""
    path = tmp_path / "warehouse.duckdb"
    engine = DuckDBEngine(path)
    engine.prepare()
    engine.stage("s", select_rows(DAY1_ROWS), {})
    assert [c.name for c in engine.staging_columns("s")] == [c.name for c in EVENT_COLUMNS]
    assert engine.staging_tables() == ["s"]
    engine.close()
    reader = duckdb.connect(str(path), read_only=True)
    try:
        tables = reader.execute(
            "SELECT table_schema, table_name FROM information_schema.tables"
        ).fetchall()
    finally:
        reader.close()
    assert tables == [("_tidegate", "commit_markers")]


# --- one writing process per file ----------------------------------------------------------------


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Path]:
    """A warehouse file held open for writing by another process."""
    path = tmp_path / "held.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        yield path
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def test_a_second_writer_is_busy(held: Path) -> None:
    with pytest.raises(BusyError) as raised:
        DuckDBEngine(held)
    assert raised.value.exit_code == 4
    assert str(held) in str(raised.value)
    assert "--wait" in str(raised.value)


def test_a_waiting_writer_says_so_once_then_gives_up(held: Path) -> None:
    told: list[str] = []
    with pytest.raises(BusyError) as raised:
        DuckDBEngine(held, wait=True, wait_timeout=0.3, on_wait=told.append)
    assert raised.value.exit_code == 4
    assert len(told) == 1
    assert str(held) in told[0]


def test_the_engine_holds_the_file_until_closed(tmp_path: Path) -> None:
    path = tmp_path / "warehouse.duckdb"
    probe = [sys.executable, "-c", OPENER, str(path)]
    engine = DuckDBEngine(path)
    engine.prepare()
    try:
        assert subprocess.run(probe, timeout=60).returncode == 4
    finally:
        engine.close()
    assert subprocess.run(probe, timeout=60).returncode == 0


def test_a_table_of_the_file_is_frozen_while_open_a_view_is_not(tmp_path: Path) -> None:
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE orders AS SELECT 1 AS n")
        con.execute("CREATE VIEW recent AS SELECT * FROM orders")
    engine = DuckDBEngine(path)
    try:
        assert engine.frozen_while_open("orders")
        # a view's rows may come from files another process writes
        assert not engine.frozen_while_open("recent")
        # a temporary table of the same name is what a read of the name finds
        engine._run("CREATE TABLE shadowed AS SELECT 1 AS n")
        assert engine.frozen_while_open("shadowed")
        engine._run("CREATE TEMP TABLE shadowed AS SELECT 2 AS n")
        assert not engine.frozen_while_open("shadowed")
        # the reason it may be frozen: no other process opens the file meanwhile
        probe = [sys.executable, "-c", OPENER, str(path)]
        assert subprocess.run(probe, timeout=60).returncode == 4
    finally:
        engine.close()


# --- a staged column whose type tidegate cannot name ---------------------------------------------


def test_a_bare_null_column_fails_the_attempt_in_one_line(project: Path) -> None:
    (project / "models" / "notes.sql").write_text(
        '/* tidegate\ngrain = "day"\ntime_column = "d"\nstart = "2025-01-01"\n\n'
        '[columns]\nd = "DATE NOT NULL"\nnote = "VARCHAR"\n*/\n'
        "SELECT CAST(order_ts AS DATE) AS d, NULL AS note FROM orders\n"
        "WHERE order_ts >= $start AND order_ts < $end\n"
    )
    assert tidegate("build", "--project", project).exit_code == 0
    # the deploy preflight plans the query and already sees it
    refused = tidegate("deploy", "notes", "--project", project)
    assert refused.exit_code == 3
    [line] = refused.stderr.strip().splitlines()
    assert "preflight" in line and 'column note has type "NULL"' in line
    assert tidegate("deploy", "notes", *FORCED, "--project", project).exit_code == 0
    result = tidegate("run", "notes", "--partition", "2025-01-01", "--project", project)
    assert result.exit_code == 1, result.stderr
    assert "internal error" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    shown = tidegate("show", "partition", "notes", "2025-01-01", "--project", project, "--json")
    assert shown.json()["state"] == "failed"


def test_an_engine_error_while_reading_inputs_fails_the_attempt_and_ends_the_run(
    project: Path,
) -> None:
    """The source's time column is missing in the warehouse: the run fails, and the ledger says
    so — it does not keep showing a run and a partition as running after the process ended."""
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text().replace('time_column = "order_ts"', 'time_column = "created_at"')
    )
    assert tidegate("build", "--project", project).exit_code == 0
    assert tidegate("deploy", "daily_revenue", *FORCED, "--project", project).exit_code == 0
    result = tidegate("run", "daily_revenue", "--partition", "2025-01-01", "--project", project)
    assert result.exit_code == 1
    assert len(result.stderr.strip().splitlines()) == 1

    status = tidegate("status", "daily_revenue", "--project", project, "--json").json()
    (model,) = status["models"]
    assert model["last_run"]["status"] == "failed"
    assert model["partitions"]["running"] == 0
    assert model["partitions"]["failed"] == 1


def _threads(engine: DuckDBEngine) -> int:
    return int(engine._one("SELECT current_setting('threads')")[0])


def test_batches_in_flight_share_the_cores_and_give_them_back(duck: DuckDBEngine) -> None:
    cores = _threads(duck)
    duck.share_cores(cores)
    assert _threads(duck) == 1
    duck.share_cores(cores * 4)
    assert _threads(duck) == 1
    worker = duck.handle()
    try:
        # the setting is the database's: a worker's handle runs with it too
        assert _threads(worker) == 1
    finally:
        worker.close()
    duck.share_cores(1)
    assert _threads(duck) == cores


THREADS_SEEN = """/* tidegate
grain = "day"
time_column = "order_date"
start = "2025-01-01"

[columns]
order_date = "DATE NOT NULL"
threads = "BIGINT NOT NULL"
*/
SELECT CAST(order_ts AS DATE) AS order_date,
       max(CAST(current_setting('threads') AS BIGINT)) AS threads
FROM orders WHERE order_ts >= $start AND order_ts < $end GROUP BY 1
"""


def test_a_batch_runs_on_the_cores_the_other_batches_leave_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model reads DuckDB's thread count while its batch runs. A project's SQL may not read
    the engine's settings (sql/sandbox.py): the check is off here, to watch tidegate's own."""
    import tidegate.sql.model_sql as model_sql
    import tidegate.sql.sandbox as sandbox

    monkeypatch.setattr(model_sql, "refused_call", lambda tree: None)
    monkeypatch.setattr(sandbox, "refused_call", lambda tree: None)
    (project / "models" / "threads_seen.sql").write_text(THREADS_SEEN)
    for args in (("build",), ("deploy", "threads_seen")):
        assert tidegate(*args, "--project", project).exit_code == 0
    cores = int(duckdb.connect().execute("SELECT current_setting('threads')").fetchone()[0])

    def seen(first: str, last: str, batch_size: int) -> list[tuple[int]]:
        ran = tidegate(
            "backfill", "threads_seen", "--partitions", f"{first}..{last}",
            "--batch-size", str(batch_size), "--max-concurrency", "2", "--project", project,
        )  # fmt: skip
        assert ran.exit_code == 0, (ran.stdout, ran.stderr)
        return warehouse_rows(
            project,
            "SELECT DISTINCT threads FROM threads_seen WHERE order_date BETWEEN ? AND ?",
            [first, last],
        )

    # one batch though two may run: it has every core
    assert seen("2025-01-01", "2025-01-04", 4) == [(cores,)]
    # four batches, two in flight: each has its share
    assert seen("2025-01-05", "2025-01-08", 1) == [(max(1, cores // 2),)]


def test_a_statement_parsed_once_answers_each_run_with_its_own_values(duck: DuckDBEngine) -> None:
    window = "SELECT count(*) FROM range(100) AS r(i) WHERE i >= $start AND i < $end"
    answers = [
        duck._one(window, {"start": s, "end": e})[0] for s, e in ((0, 10), (5, 7), (90, 200))
    ]
    assert answers == [10, 2, 10]


def test_the_parsed_statements_a_handle_keeps_are_bounded(duck: DuckDBEngine) -> None:
    for n in range(PARSED_KEPT + 50):
        assert duck._one(f"SELECT {n} AS n")[0] == n
    assert len(duck._parsed) == PARSED_KEPT
    # the oldest went first, and is parsed again when it runs again
    assert "SELECT 0 AS n" not in duck._parsed
    assert f"SELECT {PARSED_KEPT + 49} AS n" in duck._parsed
    assert duck._one("SELECT 0 AS n")[0] == 0


def test_a_statement_duckdb_cannot_parse_is_one_engine_error(duck: DuckDBEngine) -> None:
    with pytest.raises(EngineError) as raised:
        duck._one("SELEC 1")
    assert str(raised.value).startswith("duckdb: Parser Error")
    assert "\n" not in str(raised.value)
