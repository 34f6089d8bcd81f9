"""The migration backfill on a live PostgreSQL table (issue 9's acceptance).

A 1,000,000-row `orders` table gets a new `net_revenue` column; `orders_net_revenue` fills it in
chunks of 10,000 order ids while an application process keeps inserting orders and updating
their amounts, writing `net_revenue` itself. The backfill is killed three times — at two seeded
crash points and once at a moment of the test's choosing, most likely inside a batch's
transaction — and resumed. At the end an independent query finds no row whose value differs
from the expression; a sampler polling pg_stat_activity and pg_locks every 20 ms saw no
tidegate transaction last beyond the bounds the backfill set (lock_timeout, statement_timeout);
and the application never got an error.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from tests.engines.postgres_kit import admin, fresh_database, rows, use_postgres
from tests.faults.backfill_kit import backfill_run_ids
from tests.faults.ledger import ledger_rows, wait_until
from tests.kit import (
    FORCED,
    REPO,
    continued_until_exit,
    example_project,
    run_process,
    spawn,
    until_stopped,
)
from tests.ranges.range_kit import DIFFERING, MODEL, add_model
from tidegate.crash import ENVIRONMENT_VARIABLE, SIGNAL_VARIABLE

pytestmark = [pytest.mark.postgres, pytest.mark.crash, pytest.mark.slow]

ORDERS = 1_000_000
SMALL_ORDERS = 20_000  # where only the locks matter
CHUNK = 10_000
LOCK_TIMEOUT = 1.0
STATEMENT_TIMEOUT = 5.0
# a range's transaction (one per range, whatever the batch size) locks the range's differing
# rows, runs the UPDATE, its audit and the marker insert, each bounded by the statement timeout
# (their lock waits by the lock timeout, within it)
TRANSACTION_BOUND = 4 * STATEMENT_TIMEOUT
SEED = 9

GENERATE = """
CREATE TABLE orders AS
SELECT g::bigint AS order_id,
       timestamp '2025-01-01' + (g % 31536000) * interval '1 second' AS order_ts,
       (g % 1000)::bigint AS customer_id,
       CASE WHEN g % 10 = 0 THEN 'refunded' ELSE 'paid' END::varchar AS status,
       (10 + (g % 10000) / 100.0)::decimal(18, 2) AS gross_amount,
       (g % 7)::decimal(18, 2) AS discount,
       (CASE WHEN g % 10 = 0 THEN 1 ELSE 0 END)::decimal(18, 2) AS refund
FROM generate_series(1, {orders}) AS g;
ALTER TABLE orders ADD PRIMARY KEY (order_id);
ALTER TABLE orders ADD COLUMN net_revenue DECIMAL(18, 2);
ANALYZE orders;
"""


# tidegate's sessions waiting for a lock
WAITING_FOR_A_LOCK = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND application_name = 'tidegate' AND wait_event_type = 'Lock'"
)


def backfill_waiting_for_a_lock(project: Path, dsn: str, order: int) -> subprocess.Popen[str]:
    """A backfill of chunk 0, once it waits for the lock the application holds on `order`."""
    process = spawn(
        "backfill", MODEL, "--partitions", "0", "--lock-timeout", "30s", "--project", project
    )
    wait_until(
        f"the update waiting for order {order}",
        lambda: rows(dsn, WAITING_FOR_A_LOCK)[0][0] or None,
        30,
    )
    return process


def filled_at_the_first_try(process: subprocess.Popen[str], project: Path, dsn: str) -> None:
    """The backfill of chunk 0 ended well, its range filled without a retried try."""
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    tries = ledger_rows(project, "SELECT message FROM check_results WHERE kind = 'contention'")
    assert tries == [], tries
    [(left,)] = rows(dsn, f"{DIFFERING} AND order_id < {CHUNK}")
    assert left == 0


@dataclass
class Sampler:
    """Polls the server every 20 ms for tidegate's open transactions and the locks they hold
    on `orders`."""

    dsn: str
    samples: int = 0
    holding: int = 0  # samples in which a tidegate transaction held a lock on orders
    longest: float = 0.0  # the oldest tidegate transaction seen, seconds
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    xids: set[str] = field(default_factory=set)  # of tidegate transactions holding locks
    QUERY = (
        "SELECT extract(epoch FROM now() - a.xact_start), a.backend_xid::text, "
        "EXISTS (SELECT 1 FROM pg_locks AS l WHERE l.pid = a.pid AND l.granted "
        "AND l.relation = 'orders'::regclass) "
        "FROM pg_stat_activity AS a WHERE a.datname = current_database() "
        "AND a.application_name = 'tidegate' AND a.xact_start IS NOT NULL "
        "AND a.pid <> pg_backend_pid()"
    )

    def run(self) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as con:
                while not self._stop.is_set():
                    found = con.execute(self.QUERY).fetchall()
                    self.samples += 1
                    self.holding += any(held for _, _, held in found)
                    self.longest = max([self.longest, *(float(age) for age, _, _ in found)])
                    self.xids.update(xid for _, xid, held in found if xid is not None and held)
                    time.sleep(0.02)
        except psycopg.Error as error:
            self.errors.append(str(error))

    @contextmanager
    def polling(self) -> Iterator[Sampler]:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(10)


@contextmanager
def application(dsn: str) -> Iterator[dict[str, int]]:
    """The application writing orders until the block ends; what it did, once it has."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.ranges.app_writer", dsn, str(SEED)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    did: dict[str, int] = {}
    try:
        yield did
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, f"the application failed: {err}"
    did.update(json.loads(out.strip().splitlines()[-1]))


def published(project: Path) -> int | None:
    [(count,)] = ledger_rows(
        project,
        "SELECT count(*) FROM partitions WHERE model = ? AND attempt_id IS NOT NULL",
        (MODEL,),
    )
    return count or None


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_database("keyrange") as found:
        yield found


def test_a_live_table_is_backfilled_through_kills_without_losing_a_concurrent_write(
    tmp_path: Path, dsn: str
) -> None:
    project = example_project(tmp_path / "shop", deploy=False)
    use_postgres(project, dsn)
    for model in (project / "models").iterdir():
        model.unlink()  # only the update model: the migration's table is all this test needs
    with admin(dsn) as con:
        for statement in (
            sql.SQL(GENERATE).format(orders=sql.Literal(ORDERS)).as_string().split(";")
        ):
            if statement.strip():
                con.execute(statement)
    add_model(project, CHUNK)
    chance = random.Random(SEED)
    points = [f"before_publish:{chance.randint(3, 12)}", f"after_publish:{chance.randint(3, 12)}"]
    backfill = (
        "backfill",
        MODEL,
        "--partitions",
        "all",
        "--batch-size",
        "1",
        "--lock-timeout",
        f"{LOCK_TIMEOUT:g}s",
        "--statement-timeout",
        f"{STATEMENT_TIMEOUT:g}s",
        "--project",
        project,
    )
    with application(dsn) as app, Sampler(dsn).polling() as sampler:
        killed = run_process(*backfill, env={ENVIRONMENT_VARIABLE: points[0]})
        assert killed.exit_code == -9, killed.stderr
        [run_id] = backfill_run_ids(project)
        resume = ("backfill", "resume", run_id, "--project", project)
        killed = run_process(*resume, env={ENVIRONMENT_VARIABLE: points[1]})
        assert killed.exit_code == -9, killed.stderr
        # the third kill: at a moment of the test's choosing, once the resumed run is under way
        # (its time goes mostly to the batches' transactions)
        before = published(project) or 0
        process = spawn(*resume)
        wait_until(
            "more ranges published", lambda: (published(project) or 0) > before + 5 or None, 60
        )
        process.kill()
        process.communicate(timeout=30)
        done = run_process(*resume, timeout=120)
        assert done.exit_code == 0, done.stderr
    print(
        f"{sampler.samples} samples, {sampler.holding} with tidegate holding locks on orders, "
        f"longest tidegate transaction {sampler.longest:.3f}s; the application {app}"
    )
    assert sampler.errors == []
    assert app["updated"] > 0 and app["inserted"] > 0, app
    [(left,)] = rows(dsn, DIFFERING)
    assert left == 0, f"{left} rows differ from the expression"
    [(total,)] = rows(dsn, "SELECT count(*) FROM orders")
    assert total == ORDERS + app["inserted"]
    plan = json.loads(
        ledger_rows(project, "SELECT plan FROM runs WHERE run_id = ?", (run_id,))[0][0]
    )
    # `all`: from chunk 0 to the chunk of the largest id when the backfill started, the
    # application's first orders included
    [(first, end)] = plan["selection"]
    chunks = (end - first) // CHUNK
    assert first == 0 and chunks > ORDERS // CHUNK
    assert published(project) == chunks
    [(marked,)] = rows(
        dsn,
        "SELECT count(DISTINCT partition_start) FROM _tidegate.commit_markers WHERE model = %s",
        [MODEL],
    )
    assert marked == chunks
    # what the sampler saw: tidegate held row locks on orders, and never for long
    assert sampler.samples > 100 and sampler.holding > 0, sampler
    assert sampler.longest < TRANSACTION_BOUND, sampler
    assert (plan["lock_timeout"], plan["statement_timeout"]) == (LOCK_TIMEOUT, STATEMENT_TIMEOUT)


def small_project(tmp_path: Path, dsn: str) -> Path:
    """The update model over a table of SMALL_ORDERS orders."""
    project = example_project(tmp_path / "shop", deploy=False)
    use_postgres(project, dsn)
    for model in (project / "models").iterdir():
        model.unlink()
    with admin(dsn) as con:
        text = sql.SQL(GENERATE).format(orders=sql.Literal(SMALL_ORDERS)).as_string()
        for statement in text.split(";"):
            if statement.strip():
                con.execute(statement)
    add_model(project, CHUNK)
    return project


def test_a_statement_past_the_statement_timeout_is_a_failed_try_too(
    tmp_path: Path, dsn: str
) -> None:
    project = small_project(tmp_path, dsn)
    result = run_process(
        "backfill",
        MODEL,
        "--partitions",
        "0",
        "--statement-timeout",
        "1ms",
        "--project",
        project,
    )
    assert result.exit_code == 1, result.stderr
    [(error,)] = ledger_rows(project, "SELECT error FROM attempts WHERE state = 'failed'")
    assert "canceling statement due to statement timeout (4 tries; nothing was written)" in error
    assert rows(dsn, DIFFERING) == [(SMALL_ORDERS,)]


def test_a_lock_held_past_the_lock_timeout_fails_the_range_after_bounded_tries(
    tmp_path: Path, dsn: str
) -> None:
    """The application holds a row of the first range locked: each try of its transaction
    waits the lock timeout and rolls back, the tries are recorded, the last fails the attempt
    (nothing written) and the stop-loss halts the backfill; once the lock is gone, resume
    fills the range."""
    project = small_project(tmp_path, dsn)
    with psycopg.connect(dsn, application_name="app") as holder:
        holder.execute("SELECT 1 FROM orders WHERE order_id = 5 FOR UPDATE")
        result = run_process(
            "backfill",
            MODEL,
            "--partitions",
            "all",
            "--lock-timeout",
            "200ms",
            "--max-failures",
            "1",
            "--json",
            "--project",
            project,
        )
        assert result.exit_code == 1, result.stderr
        end = json.loads(result.stdout)
        assert end["trigger"]["name"] == "max_failures" and end["trigger"]["partition"] == "0"
        [run_id] = backfill_run_ids(project)
        [(error,)] = ledger_rows(
            project, "SELECT error FROM attempts WHERE run_id = ? AND state = 'failed'", (run_id,)
        )
        assert "canceling statement due to lock timeout (4 tries; nothing was written)" in error
        tries = ledger_rows(
            project,
            "SELECT c.message FROM check_results AS c JOIN attempts AS a "
            "ON a.attempt_id = c.attempt_id WHERE a.run_id = ? AND c.kind = 'contention' "
            "ORDER BY c.name",
            (run_id,),
        )
        assert [m.split(":")[0] for (m,) in tries] == [f"try {n} of 4" for n in range(1, 5)]
        assert "trying again in 0.5s" in tries[0][0] and "gave up" in tries[3][0]
        [(differing,)] = rows(dsn, DIFFERING)
        assert differing == SMALL_ORDERS  # nothing written
    done = run_process("backfill", "resume", run_id, "--project", project)
    assert done.exit_code == 0, done.stderr
    assert rows(dsn, DIFFERING) == [(0,)]


def test_an_expression_of_another_type_than_its_column_is_refused_before_anything_runs(
    tmp_path: Path, dsn: str
) -> None:
    """The UPDATE is planned (EXPLAIN, read-only) at deploy and before the backfill: a text
    expression for a numeric column is exit 2 with nothing written."""
    project = small_project(tmp_path, dsn)
    text = (project / "models" / f"{MODEL}.toml").read_text()
    (project / "models" / "orders_bad.toml").write_text(
        text.replace(text.split("net_revenue = ", 1)[1].split("\n")[0], '"upper(status)"')
    )
    assert run_process("build", "--project", project).exit_code == 0
    refused = run_process("deploy", "orders_bad", "--project", project)
    assert refused.exit_code == 3
    assert "[set] or checks cannot run on table orders: postgres:" in refused.stderr
    forced = run_process("deploy", "orders_bad", *FORCED, "--project", project)
    assert forced.exit_code == 0, forced.stderr
    result = run_process("backfill", "orders_bad", "--partitions", "all", "--project", project)
    assert result.exit_code == 2, result.stderr
    assert (
        "[set] or checks cannot run on table orders: postgres: operator does not exist: "
        "numeric = text; nothing was written"
    ) in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert backfill_run_ids(project) == []
    assert rows(dsn, DIFFERING) == [(SMALL_ORDERS,)]


def test_a_row_given_a_null_key_while_the_backfill_runs_fails_it_at_its_end(
    tmp_path: Path, dsn: str
) -> None:
    """The application inserts a row without a key while the backfill is paused before its
    second range's publish: every range publishes, and the run fails naming the row, which no
    key range holds."""
    project = small_project(tmp_path, dsn)
    with admin(dsn) as con:
        # the key may be NULL
        con.execute("ALTER TABLE orders DROP CONSTRAINT orders_pkey")
        con.execute("ALTER TABLE orders ALTER COLUMN order_id DROP NOT NULL")
    paused = spawn(
        "backfill",
        MODEL,
        "--partitions",
        "all",
        "--project",
        project,
        env={ENVIRONMENT_VARIABLE: "before_publish:2", SIGNAL_VARIABLE: "SIGSTOP"},
    )
    try:
        until_stopped(paused.pid)
        with admin(dsn) as con:
            con.execute(
                "INSERT INTO orders SELECT NULL, order_ts, customer_id, status, gross_amount, "
                "discount, refund, NULL FROM orders WHERE order_id = 7000"
            )
        code = continued_until_exit(paused.pid)  # it stops again before each later publish
    except BaseException:
        os.kill(paused.pid, signal.SIGKILL)
        raise
    assert paused.stderr is not None
    err = paused.stderr.read()
    assert code == 1, err
    message = (
        "key column order_id is NULL in 1 row of orders: no key range holds them, so they "
        "were not updated; give them a key and backfill their chunks"
    )
    assert message in err, err
    assert rows(dsn, DIFFERING) == [(1,)]  # the row without a key, alone
    [run_id] = backfill_run_ids(project)
    [(state, reason)] = ledger_rows(
        project, "SELECT status, reason FROM runs WHERE run_id = ?", (run_id,)
    )
    assert (state, reason) == ("failed", message)


def test_a_batch_of_ranges_is_one_transaction_per_range(tmp_path: Path, dsn: str) -> None:
    """--batch-size 3: three transactions, each holding the row locks of one range only. The
    rows a transaction wrote carry its id (xmin), and so does the marker it inserted: each
    range's rows and marker share a transaction that wrote nothing else; the sampler saw the
    transactions come and go."""
    project = small_project(tmp_path, dsn)
    with Sampler(dsn).polling() as sampler:
        result = run_process(
            "backfill", MODEL, "--partitions", "all", "--batch-size", "3", "--project", project
        )
    assert result.exit_code == 0, result.stderr
    assert sampler.errors == []
    assert sampler.longest < TRANSACTION_BOUND, sampler
    assert rows(dsn, DIFFERING) == [(0,)]
    markers = rows(
        dsn,
        "SELECT partition_start, xmin::text FROM _tidegate.commit_markers WHERE model = %s "
        "ORDER BY partition_start",
        [MODEL],
    )
    assert [start for start, _ in markers] == [0, CHUNK, 2 * CHUNK]
    assert len({xid for _, xid in markers}) == 3, markers
    written = rows(
        dsn,
        f"SELECT xmin::text, array_agg(DISTINCT order_id / {CHUNK} * {CHUNK}) FROM orders "
        "GROUP BY 1",
    )
    assert sorted((xid, chunks) for xid, chunks in written) == sorted(
        (xid, [start]) for start, xid in markers
    )
    # every tidegate transaction the sampler saw holding locks on orders was one range's
    assert sampler.xids and sampler.xids <= {xid for _, xid in markers}, sampler


def test_an_application_locking_rows_in_key_order_never_deadlocks_with_the_update(
    tmp_path: Path, dsn: str
) -> None:
    """The update locks its range's rows in key order before it writes them. The lowest order
    sits last in the heap (a scan in physical order reaches it last), and the application holds
    it; the update waits for it holding no other row of the range, so the application's next
    lock, higher in the range, is granted at once: no deadlock, no retried try."""
    project = small_project(tmp_path, dsn)
    with admin(dsn) as con:
        # no index on the key (the UPDATE alone scans in physical order, as a bitmap scan of a
        # table whose heap is out of key order does), and a new version of order 1, written
        # after every other row of the table
        con.execute("ALTER TABLE orders DROP CONSTRAINT orders_pkey")
        con.execute("ALTER TABLE orders ALTER COLUMN order_id SET NOT NULL")
        con.execute("UPDATE orders SET discount = discount WHERE order_id = 1")
        [(last,)] = con.execute("SELECT max(ctid) FROM orders").fetchall()
        [(moved,)] = con.execute("SELECT ctid FROM orders WHERE order_id = 1").fetchall()
        assert moved == last
    with psycopg.connect(dsn, application_name="app") as app:
        app.execute("SET lock_timeout = '10s'")
        app.execute("SELECT 1 FROM orders WHERE order_id = 1 FOR UPDATE")
        process = backfill_waiting_for_a_lock(project, dsn, 1)
        # key order: the application's next row is higher; the update holds none of them yet
        app.execute("SELECT 1 FROM orders WHERE order_id = 9999 FOR UPDATE")
        app.commit()
    filled_at_the_first_try(process, project, dsn)


def test_the_update_reads_committed_whatever_the_database_default(tmp_path: Path, dsn: str) -> None:
    """With REPEATABLE READ as the database's default, the update's transaction still runs
    READ COMMITTED: a row the application changes and commits while the update waits for it is
    computed from its new values, not a serialization failure."""
    project = small_project(tmp_path, dsn)
    with admin(dsn) as con:
        con.execute(
            sql.SQL(
                "ALTER DATABASE {} SET default_transaction_isolation = 'repeatable read'"
            ).format(sql.Identifier(urlsplit(dsn).path.lstrip("/")))
        )
    with psycopg.connect(dsn, application_name="app") as app:
        app.execute(
            "UPDATE orders SET gross_amount = gross_amount + 1, net_revenue = "
            "CAST(gross_amount + 1 - discount - refund AS DECIMAL(18, 2)) WHERE order_id = 5"
        )
        process = backfill_waiting_for_a_lock(project, dsn, 5)
        app.commit()
    filled_at_the_first_try(process, project, dsn)
