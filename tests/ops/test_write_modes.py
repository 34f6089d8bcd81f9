"""The merge and append write modes through the real CLI, on the orders example (20 orders a
day): a model of one row per order, keyed by `order_id`, run over the same day again after the
source changed.

Expected rows come from the source table and the warehouse, and expected checksums are
recomputed in Python from the published rows — not taken from tidegate.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from tests.faults.ledger import assert_ledger_matches_markers, published_checksums
from tests.kit import (
    FORCED,
    assert_exactly_once,
    state_dump,
    tidegate,
    warehouse_dump,
    warehouse_execute,
)
from tests.kit import warehouse_rows as read
from tidegate.domain.checksum import row_hash
from tidegate.domain.partitions import Grain, parse_partition

MODEL = "order_book"
DAY = "2025-01-02"
DAY_START = parse_partition(DAY, Grain.DAY).start
COLUMNS = ("order_id", "order_ts", "status", "gross_amount")


def model_file(write_mode: str, unique_key: str = '["order_id"]', extra: str = "") -> str:
    key = f"unique_key = {unique_key}\n" if unique_key else ""
    return (
        "/* tidegate\n"
        'grain = "day"\n'
        'time_column = "order_ts"\n'
        'start = "2025-01-01"\n'
        f'write_mode = "{write_mode}"\n'
        f"{key}"
        "\n[columns]\n"
        'order_id = "BIGINT NOT NULL"\n'
        'order_ts = "TIMESTAMP NOT NULL"\n'
        'status = "VARCHAR NOT NULL"\n'
        'gross_amount = "DECIMAL(18, 2) NOT NULL"\n'
        f"{extra}"
        "*/\n"
        "SELECT order_id, order_ts, status, gross_amount FROM orders\n"
        "WHERE order_ts >= $start AND order_ts < $end\n"
    )


def cli(project: Path, *args: str, code: int = 0) -> Any:
    result = tidegate(*args, "--project", project)
    assert result.exit_code == code, (args, result.stdout[-1500:], result.stderr)
    return result


def doc(project: Path, *args: str, code: int = 0) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(cli(project, *args, "--json", code=code).stdout)
    return document


def with_model(project: Path, text: str) -> Path:
    (project / "models" / f"{MODEL}.sql").write_text(text)
    cli(project, "build")
    cli(project, "deploy", MODEL, *FORCED)
    return project


def run_day(project: Path, code: int = 0) -> dict[str, Any]:
    return doc(project, "run", MODEL, "--partition", DAY, code=code)


def published_rows(project: Path) -> list[tuple[Any, ...]]:
    return read(
        project,
        f"SELECT {', '.join(COLUMNS)} FROM {MODEL} WHERE CAST(order_ts AS DATE) = ? ORDER BY 1",
        [date.fromisoformat(DAY)],
    )


def source_rows(project: Path) -> list[tuple[Any, ...]]:
    return read(
        project,
        f"SELECT {', '.join(COLUMNS)} FROM orders WHERE CAST(order_ts AS DATE) = ? ORDER BY 1",
        [date.fromisoformat(DAY)],
    )


def recomputed(project: Path, day: str = DAY) -> str:
    """A day's checksum from the published rows: (rows, sum of row hashes mod 2^64)."""
    texts = ", ".join(f"CAST({c} AS VARCHAR)" for c in COLUMNS)
    rows = read(
        project,
        f"SELECT {texts} FROM {MODEL} WHERE CAST(order_ts AS DATE) = ?",
        [date.fromisoformat(day)],
    )
    return f"{len(rows)}:{sum(row_hash(r) for r in rows) % 2**64:016x}"


def ledger_day(project: Path) -> tuple[int, str]:
    return published_checksums(project, MODEL)[DAY_START]


def change_the_source(project: Path) -> tuple[int, int, int]:
    """On DAY: one order changes status, one disappears (not staged again), one is new.
    Returns (changed, removed, added) order ids."""
    ids = [r[0] for r in source_rows(project)]
    changed, removed, added = ids[0], ids[1], 90_000_000
    warehouse_execute(project, f"UPDATE orders SET status = 'lost' WHERE order_id = {changed}")
    warehouse_execute(project, f"DELETE FROM orders WHERE order_id = {removed}")
    warehouse_execute(
        project,
        f"INSERT INTO orders SELECT {added}, order_ts + INTERVAL 1 SECOND, customer_id, status, "
        f"gross_amount, discount, refund FROM orders WHERE order_id = {ids[2]}",
    )
    return changed, removed, added


# -- merge ----------------------------------------------------------------------------------------


def test_merge_twice_over_the_same_partition_is_idempotent(project: Path) -> None:
    with_model(project, model_file("merge"))
    first = run_day(project)
    [outcome] = first["partitions"]
    assert outcome["state"] == "published"
    assert_exactly_once(published_rows(project), source_rows(project))
    assert ledger_day(project) == (20, outcome["checksum"]) == (20, recomputed(project))

    again = run_day(project)
    assert again["partitions"][0]["checksum"] == outcome["checksum"]
    assert_exactly_once(published_rows(project), source_rows(project))
    assert ledger_day(project) == (20, outcome["checksum"])
    assert_ledger_matches_markers(project, MODEL)

    # the rerun proves it: same version, same inputs, same checksum
    proved = doc(project, "rerun", again["run_id"], "--partitions", DAY)
    assert [(p["deterministic"], p["before"] == p["after"]) for p in proved["proofs"]] == [
        (True, True)
    ]


def test_merge_replaces_changed_keys_adds_new_ones_and_keeps_the_others(project: Path) -> None:
    with_model(project, model_file("merge"))
    run_day(project)
    before = {r[0]: r for r in published_rows(project)}
    changed, removed, added = change_the_source(project)

    outcome = run_day(project)["partitions"][0]
    after = {r[0]: r for r in published_rows(project)}
    assert after[changed][2] == "lost" and before[changed][2] != "lost"
    assert after[removed] == before[removed]  # not staged: a merge keeps it
    assert added in after and added not in before
    assert set(after) == set(before) | {added}
    assert len(published_rows(project)) == len(after)  # one row per key
    # the ledger and the marker describe what the partition holds (21 rows), not the 20 staged
    assert (outcome["rows"], outcome["checksum"]) == (21, recomputed(project))
    assert ledger_day(project) == (21, recomputed(project))
    assert_ledger_matches_markers(project, MODEL)
    shown = doc(project, "show", "partition", MODEL, DAY)["published"]
    assert (shown["rows"], shown["checksum"]) == (21, recomputed(project))


def test_merge_after_an_additive_change_fills_the_new_column_of_merged_rows(
    project: Path,
) -> None:
    with_model(project, model_file("merge"))
    run_day(project)
    removed = source_rows(project)[0][0]
    warehouse_execute(project, f"DELETE FROM orders WHERE order_id = {removed}")
    wider = model_file("merge", extra='customer_id = "BIGINT"\n').replace(
        "SELECT order_id,", "SELECT customer_id, order_id,"
    )
    with_model(project, wider)
    outcome = run_day(project)["partitions"][0]
    nulls = read(
        project,
        f"SELECT order_id FROM {MODEL} WHERE customer_id IS NULL ORDER BY order_id",
    )
    assert nulls == [(removed,)]  # kept from v1, without the new column
    assert outcome["rows"] == 20 and ledger_day(project) == (20, outcome["checksum"])
    assert_ledger_matches_markers(project, MODEL)


def test_a_merge_backfill_in_batches_records_each_partition_content(project: Path) -> None:
    """Three days per batch, one transaction each: every day's marker and ledger row carry that
    day's content, including the rows kept from before."""
    with_model(project, model_file("merge"))
    days = [f"2025-01-0{d}" for d in range(1, 7)]
    backfill = ("backfill", MODEL, "--partitions", f"{days[0]}..{days[-1]}", "--batch-size", "3")
    cli(project, *backfill)
    kept = source_rows(project)[0][0]  # a DAY order, not staged again
    warehouse_execute(project, f"DELETE FROM orders WHERE order_id = {kept}")
    cli(project, *backfill)
    ledger = published_checksums(project, MODEL)
    for day in days:
        start = parse_partition(day, Grain.DAY).start
        assert ledger[start] == (20, recomputed(project, day)), day
    assert kept in {r[0] for r in published_rows(project)}
    assert assert_ledger_matches_markers(project, MODEL) == 6


# -- append ---------------------------------------------------------------------------------------


def test_append_with_a_key_adds_only_keys_not_there_yet(project: Path) -> None:
    with_model(project, model_file("append"))
    run_day(project)
    before = {r[0]: r for r in published_rows(project)}
    changed, removed, added = change_the_source(project)

    outcome = run_day(project)["partitions"][0]
    after = {r[0]: r for r in published_rows(project)}
    assert after[changed] == before[changed]  # its key is there: skipped, not replaced
    assert after[removed] == before[removed]
    assert set(after) == set(before) | {added}
    assert len(published_rows(project)) == 21
    assert (outcome["rows"], outcome["checksum"]) == (21, recomputed(project))

    # once more on the same inputs: nothing added, the same checksum
    again = run_day(project)["partitions"][0]
    assert again["checksum"] == outcome["checksum"]
    assert len(published_rows(project)) == 21
    assert_ledger_matches_markers(project, MODEL)


def test_append_without_a_key_refuses_a_second_publish_and_writes_nothing(
    project: Path,
) -> None:
    with_model(project, model_file("append", unique_key=""))
    first = run_day(project)
    assert first["partitions"][0]["state"] == "published"
    assert_exactly_once(published_rows(project), source_rows(project))
    ledger, warehouse = state_dump(project)["partitions"], warehouse_dump(project)

    refused = run_day(project, code=1)
    [outcome] = refused["partitions"]
    assert outcome["state"] == "failed"
    assert "append without a unique key" in outcome["reason"]
    assert first["run_id"] in outcome["reason"]  # names the run that published it
    assert warehouse_dump(project) == warehouse
    kept = {r[1]: r for r in state_dump(project)["partitions"]}
    assert {r[1]: r[:10] for r in ledger} == {k: r[:10] for k, r in kept.items()}
    assert_exactly_once(published_rows(project), source_rows(project))

    # a partition never published appends as usual; the rerun judgment refuses the one that is
    cli(project, "run", MODEL, "--partition", "2025-01-03")
    judged = doc(project, "rerun", first["run_id"], "--partitions", DAY, "--dry-run")
    assert judged["judgment"][0]["verdict"] == "refused"


def test_a_backfill_leaves_out_what_an_append_without_a_key_published(project: Path) -> None:
    with_model(project, model_file("append", unique_key=""))
    run_day(project)  # 2025-01-02
    week = ("--partitions", "2025-01-01..2025-01-04")
    plan = doc(project, "backfill", MODEL, *week, "--dry-run")
    assert (plan["partitions"], plan["refused"]) == (3, [DAY])
    assert plan["ranges"] == ["2025-01-01", "2025-01-03..2025-01-04"]
    ledger, warehouse = state_dump(project)["partitions"], warehouse_dump(project)
    again = cli(project, "backfill", MODEL, "--partitions", DAY, code=2)
    assert "every partition in 2025-01-02 is published already" in again.stderr
    assert state_dump(project)["partitions"] == ledger and warehouse_dump(project) == warehouse
    done = cli(project, "backfill", MODEL, *week, "--json").json()
    assert done["status"] == "succeeded" and done["published"] == 3
    every = "SELECT {0} FROM {1} WHERE order_ts < DATE '2025-01-05' ORDER BY 1"
    published = read(project, every.format(", ".join(COLUMNS), MODEL))
    assert_exactly_once(published, read(project, every.format(", ".join(COLUMNS), "orders")))


# -- staged rows with a repeated key ------------------------------------------------------------


@pytest.mark.parametrize(
    ("write_mode", "extra", "check"),
    [
        ("merge", "", "unique key"),
        ("append", "", "unique key"),
        # a declared unique check on the key already says it: no second one runs
        (
            "merge",
            '\n[[checks]]\ntype = "unique"\ncolumns = ["order_id"]\n',
            "unique_order_id",
        ),
    ],
)
def test_a_repeated_key_in_the_staged_rows_fails_and_leaves_the_partition_alone(
    project: Path, write_mode: str, extra: str, check: str
) -> None:
    with_model(project, model_file(write_mode, extra=extra))
    run_day(project)
    rows, checksum = ledger_day(project)
    warehouse = warehouse_dump(project)
    twice = source_rows(project)[3][0]
    warehouse_execute(
        project,
        "INSERT INTO orders SELECT order_id, order_ts + INTERVAL 1 SECOND, customer_id, "
        f"'shipped', gross_amount, discount, refund FROM orders WHERE order_id = {twice}",
    )

    failed = run_day(project, code=1)
    [outcome] = failed["partitions"]
    assert outcome["state"] == "failed"
    assert f"check {check} failed: 1 key(s) repeated" in outcome["reason"]
    assert {k: v for k, v in warehouse_dump(project).items() if k != "main.orders"} == {
        k: v for k, v in warehouse.items() if k != "main.orders"
    }
    assert ledger_day(project) == (rows, checksum)
    [attempt] = doc(project, "show", "run", failed["run_id"])["attempts"]
    assert attempt["failed_checks"] == [check]  # one check said it, not two
