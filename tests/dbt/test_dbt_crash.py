"""G1 for a dbt model: a real `tidegate backfill` of the fixture's microbatch model `orders`
(five days, batches of one) is SIGKILLed around the publish of its third batch, then resumed by
run id; the table, the ledger and the warehouse markers end as an uninterrupted backfill's."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.dbt import kit
from tests.faults.ledger import (
    assert_ledger_matches_markers,
    ledger_rows,
    live_attempts,
    published_checksums,
)
from tests.kit import run_process, run_process_events, warehouse_rows
from tidegate.crash import ENVIRONMENT_VARIABLE
from tidegate.domain.partitions import to_utc

pytestmark = [pytest.mark.slow, pytest.mark.crash]

MODEL = "orders"
UPSTREAMS = ("stg_customers", "stg_orders", "stg_payments")  # what orders reads, published first
DAYS = [kit.BEGIN + timedelta(days=d) for d in range(5)]
KILLED_AT = 3  # the third batch (day 3 of 5): two published before it, two left after it

# (crash point, what the resume concludes about the attempt the dead process left pending):
# before its publish nothing of it reached the warehouse; after it, its marker is there and the
# ledger never heard of it
POINTS = [("before_publish", "failed"), ("after_publish", "published")]


@dataclass(frozen=True)
class Clean:
    """An uninterrupted backfill of orders with the same plan: its warehouse file and the
    ledger's (rows, checksum) by partition."""

    warehouse: Path
    checksums: dict[int, tuple[int, str]]


def prepared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> kit.Shop:
    """A DuckDB shop, built and every model deployed, orders' upstreams published."""
    shop = kit.duckdb_shop(tmp_path, monkeypatch)
    kit.cli(shop.root, "build")
    for model in kit.MODELS:
        kit.cli(shop.root, "deploy", model)
    for model in UPSTREAMS:
        window = "all" if model in kit.WHOLE else shop.window
        kit.cli(shop.root, "backfill", model, "--partitions", window)
    return shop


def backfill(shop: kit.Shop) -> tuple[str, ...]:
    return ("backfill", MODEL, "--partitions", shop.window, "--batch-size", "1")


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clean]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        shop = prepared(tmp_path_factory.mktemp("dbt-clean"), monkeypatch)
        done = run_process(*backfill(shop), "--project", shop.root, "--json", timeout=300)
        assert done.exit_code == 0, (done.stdout, done.stderr)
        checksums = published_checksums(shop.root, MODEL)
        assert len(checksums) == len(DAYS)
        yield Clean(shop.warehouse, checksums)


def day_of(partition_start: int) -> date:
    return to_utc(partition_start).date()


def ledger_days(root: Path) -> list[date]:
    return sorted(day_of(start) for start in published_checksums(root, MODEL))


def marker_days(root: Path) -> list[date]:
    rows = warehouse_rows(
        root,
        "SELECT DISTINCT partition_start FROM _tidegate.commit_markers WHERE model = ?",
        [MODEL],
    )
    return sorted(day_of(r[0]) for r in rows)


@pytest.mark.parametrize(("point", "concluded"), POINTS, ids=[p for p, _ in POINTS])
def test_a_killed_backfill_of_a_dbt_model_resumes_to_a_clean_run(
    point: str,
    concluded: str,
    clean: Clean,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shop = prepared(tmp_path, monkeypatch)
    crashed = run_process(
        *backfill(shop),
        "--project",
        shop.root,
        env={ENVIRONMENT_VARIABLE: f"{point}:{KILLED_AT}"},
        timeout=300,
    )
    assert crashed.exit_code == -signal.SIGKILL, (crashed.exit_code, crashed.stderr)

    # what the dead process left: its run still running, the third batch's attempt pending,
    # two days in the ledger, and a third day's marker when the publish had committed
    [(run_id, models)] = ledger_rows(
        shop.root, "SELECT run_id, models FROM runs WHERE status = 'running'"
    )
    assert json.loads(models) == [MODEL]
    [(pending, pending_run, _)] = live_attempts(shop.root)
    assert pending_run == run_id
    assert ledger_days(shop.root) == DAYS[: KILLED_AT - 1]
    committed = DAYS[:KILLED_AT] if concluded == "published" else DAYS[: KILLED_AT - 1]
    assert marker_days(shop.root) == committed

    resumed = run_process_events(
        "backfill", "resume", run_id, "--project", shop.root, "--json", timeout=300
    )
    assert resumed.exit_code == 0, (resumed.stdout, resumed.stderr)
    found = resumed.events
    assert resumed.json()["status"] == "succeeded"
    assert found[0]["event"] == "start" and found[0]["run_id"] == run_id
    assert found[-1]["event"] == "end" and found[-1]["status"] == "succeeded"
    # the resume did only what the dead process had not committed
    redone = [e["partition"] for e in found if e["event"] == "partition"]
    assert all(e["state"] == "published" for e in found if e["event"] == "partition")
    assert redone == [str(d) for d in DAYS if d not in committed]

    # the table: a clean run's rows; the ledger: its checksums, agreeing with the markers
    kit.same_rows_duckdb(clean.warehouse, shop.warehouse, MODEL)
    assert published_checksums(shop.root, MODEL) == clean.checksums
    assert assert_ledger_matches_markers(shop.root, MODEL) == len(DAYS)
    assert live_attempts(shop.root) == []
    # no staging table in the warehouse file: only the dbt sources' raw schema, the published
    # tables and tidegate's own
    left = warehouse_rows(
        shop.root,
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_schema NOT IN ('main', 'raw', '_tidegate', '_tidegate_shadow')",
    )
    assert left == []
    [(state,)] = ledger_rows(
        shop.root, "SELECT state FROM attempts WHERE attempt_id = ?", (pending,)
    )
    assert state == concluded
    [(status,)] = ledger_rows(shop.root, "SELECT status FROM runs WHERE run_id = ?", (run_id,))
    assert status == "succeeded"
