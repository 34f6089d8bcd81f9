"""`tidegate verify` on the embedded default: the ledger against the warehouse's tables, commit
markers and rows; `--repair` then `backfill --stale-only` make it clean again; a lost ledger is
refused by every command and rebuilt from the markers."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.kit import example_project, state_dump, tidegate, warehouse_dump, warehouse_execute
from tests.ops.test_json_schemas import validator

JANUARY = "2025-01-01..2025-01-31"
LOST = "the ledger is empty but the warehouse holds"


def cli(project: Path, *args: str, code: int = 0) -> Any:
    result = tidegate(*args, "--project", project, "--json")
    assert result.exit_code == code, (args, result.stdout[-1500:], result.stderr)
    return result


def check(project: Path, *args: str, code: int = 0) -> dict[str, Any]:
    """`verify ARGS --json`: its document, valid against verify.v1.json."""
    document: dict[str, Any] = cli(project, "verify", *args, code=code).json()
    errors = [e.message for e in validator("verify").iter_errors(document)]
    assert not errors, errors
    return document


def backfill(project: Path, model: str, partitions: str, *flags: str) -> None:
    result = tidegate(
        "backfill", model, "--partitions", partitions, "--batch-size", "8", *flags,
        "--project", project,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr


def ledger(project: Path, query: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(project / ".tidegate" / "state.db")
    try:
        return [tuple(r) for r in con.execute(query).fetchall()]
    finally:
        con.close()


def published(project: Path, model: str) -> dict[str, str]:
    """partition start → its published attempt, as the ledger records it."""
    rows = ledger(
        project,
        "SELECT partition_start, attempt_id FROM partitions WHERE attempt_id IS NOT NULL "
        f"AND model = '{model}' ORDER BY partition_start",
    )
    return {str(start): attempt for start, attempt in rows}


@pytest.fixture
def january(tmp_path: Path) -> Path:
    """The example with January of daily_revenue and its month published."""
    project = example_project(tmp_path / "orders", rows_per_day=4)
    backfill(project, "daily_revenue", JANUARY)
    backfill(project, "monthly_revenue", "2025-01")
    return project


def test_a_dropped_table_is_found_marked_and_backfilled_clean_again(january: Path) -> None:
    clean = check(january, "--checksums")
    assert clean["clean"] and clean["findings"] == []
    counts = {m["model"]: (m["published"], m["markers"]) for m in clean["models"]}
    assert counts == {
        "daily_revenue": (31, 31),
        "monthly_revenue": (1, 1),
        "revenue_report": (0, 0),
    }
    assert clean["models"][0]["checksums"] == {"how": "all", "compared": 31, "note": None}

    warehouse_execute(january, "DROP TABLE daily_revenue")
    found = check(january, code=1)
    assert not found["clean"]
    assert {(f["model"], f["kind"]) for f in found["findings"]} == {
        ("daily_revenue", "missing table")
    }
    assert len(found["findings"]) == 31
    recorded = published(january, "daily_revenue")
    assert sorted(f["attempt_id"] for f in found["findings"]) == sorted(recorded.values())
    human = tidegate("verify", "--project", january)
    assert human.exit_code == 1
    assert "missing table" in human.stdout and "2025-01-01..2025-01-31" in human.stdout
    assert human.stderr.strip() == "error: 31 partition(s) diverged from the ledger"

    repaired = check(january, "--repair", code=1)["repaired"]
    assert [(r["model"], r["kind"], r["marked"], r["already_marked"]) for r in repaired] == [
        ("daily_revenue", "missing", 31, 0)
    ]
    again = check(january, "--repair", code=1)["repaired"]
    assert [(r["taint_id"], r["marked"], r["already_marked"]) for r in again] == [(None, 0, 31)]
    open_marks = "SELECT count(*) FROM tainted_partitions WHERE cleared_at IS NULL"
    assert ledger(january, open_marks) == [(31,)]

    backfill(january, "daily_revenue", JANUARY, "--stale-only")
    after = check(january, "--checksums")
    assert after["clean"], after["findings"]
    assert ledger(january, open_marks) == [(0,)]
    assert set(published(january, "daily_revenue").values()).isdisjoint(recorded.values())


def test_an_older_warehouse_copy_shows_other_and_missing_markers(
    january: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "warehouse-then.duckdb"
    shutil.copy(january / "warehouse.duckdb", copy)
    state_then = tmp_path / "state-then.db"
    shutil.copy(january / ".tidegate" / "state.db", state_then)
    before = published(january, "daily_revenue")
    backfill(january, "daily_revenue", "2025-01-01..2025-01-03")
    backfill(january, "daily_revenue", "2025-02-01..2025-02-02")
    after = published(january, "daily_revenue")
    shutil.copy(january / "warehouse.duckdb", tmp_path / "warehouse-now.duckdb")

    shutil.copy(copy, january / "warehouse.duckdb")
    found = check(january, "daily_revenue", code=1)["findings"]
    kinds = {(f["partition"], f["kind"], f["attempt_id"], f["found"]) for f in found}
    starts = sorted(after)
    assert kinds == {
        *(
            (p, "other marker", after[s], before[s])
            for p, s in zip(_days(1, 3), starts[:3], strict=True)
        ),
        *((p, "missing marker", after[s], None) for p, s in zip(_feb(), starts[-2:], strict=True)),
    }
    check(january, "daily_revenue", "--repair", code=1)
    kinds_marked = ledger(
        january,
        "SELECT t.kind, count(*) FROM tainted_partitions m JOIN taints t USING (taint_id) "
        "WHERE m.cleared_at IS NULL GROUP BY t.kind ORDER BY t.kind",
    )
    assert kinds_marked == [("diverged", 3), ("missing", 2)]
    backfill(january, "daily_revenue", "2025-01-01..2025-02-28", "--stale-only")
    assert check(january, "--checksums")["clean"]

    # the other way round: the ledger older than the warehouse
    shutil.copy(tmp_path / "warehouse-now.duckdb", january / "warehouse.duckdb")
    shutil.copy(state_then, january / ".tidegate" / "state.db")
    for suffix in ("-wal", "-shm"):
        (january / ".tidegate" / f"state.db{suffix}").unlink(missing_ok=True)
    found = check(january, "daily_revenue", code=1)["findings"]
    unrecorded = sorted(f["found"] for f in found if f["kind"] == "marker with no ledger record")
    assert unrecorded == sorted(after[s] for s in starts[:3] + starts[-2:])
    assert {f["partition"] for f in found if f["kind"] == "other marker"} == set(_days(1, 3))


def _days(first: int, last: int) -> list[str]:
    return [f"2025-01-{d:02d}" for d in range(first, last + 1)]


def _feb() -> list[str]:
    return ["2025-02-01", "2025-02-02"]


def test_a_row_changed_behind_tidegates_back_is_found_by_checksums(january: Path) -> None:
    warehouse_execute(
        january,
        "UPDATE daily_revenue SET gross_revenue = gross_revenue + 1 "
        "WHERE order_date = DATE '2025-01-07'",
    )
    assert check(january)["clean"]  # the markers alone cannot see it
    found = check(january, "daily_revenue", "--checksums", code=1)["findings"]
    assert [(f["partition"], f["kind"]) for f in found] == [("2025-01-07", "checksum differs")]
    assert found[0]["found"] != found[0]["expected"]
    assert found[0]["found"].split(":")[0] == found[0]["expected"].split(":")[0]  # same rows
    sampled = check(
        january,
        "daily_revenue",
        "--checksums",
        "--sample",
        "5",
    )
    assert sampled["models"][0]["checksums"]["how"] == "sample"
    assert sampled["models"][0]["checksums"]["compared"] == 5
    ranged = check(
        january, "daily_revenue", "--partitions", "2025-01-01..2025-01-06", "--checksums"
    )
    assert ranged["clean"] and ranged["models"][0]["published"] == 6
    check(january, "daily_revenue", "--checksums", "--repair", code=1)
    backfill(january, "daily_revenue", JANUARY, "--stale-only")
    assert check(january, "--checksums")["clean"]


def test_a_lost_ledger_is_refused_and_rebuilt_from_the_markers(january: Path) -> None:
    status_then = cli(january, "status").json()
    markers_then = warehouse_dump(january)["_tidegate.commit_markers"]
    (january / ".tidegate" / "state.db").write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        (january / ".tidegate" / f"state.db{suffix}").unlink(missing_ok=True)
    for command in (("status",), ("run", "daily_revenue", "--partition", "2025-02-01"), ("build",)):
        refused = tidegate(*command, "--project", january)
        assert refused.exit_code == 2, (command, refused.stderr)
        assert refused.stderr.strip() == (
            f"error: {LOST} 32 commit markers of project orders; restore the ledger, or "
            "rebuild it from the markers with `tidegate verify --rebuild-ledger`"
        )
    assert warehouse_dump(january)["_tidegate.commit_markers"] == markers_then

    rebuilt = check(january, "--rebuild-ledger")["rebuilt"]
    assert (rebuilt["markers"], rebuilt["runs"], rebuilt["versions_lost"]) == (32, 2, [])
    assert sorted(rebuilt["activated"]) == ["daily_revenue", "monthly_revenue"]
    status = cli(january, "status").json()
    counts = {m["model"]: m["partitions"]["published"] for m in status["models"]}
    assert counts == {m["model"]: m["partitions"]["published"] for m in status_then["models"]}
    events = cli(january, "history", "daily_revenue").json()["events"]
    assert "ledger-rebuilt" in [e["kind"] for e in events]
    run_id = status["models"][0]["last_run"]["run_id"]
    shown = cli(january, "show", "run", run_id).json()
    assert shown["kind"] == "rebuilt" and "rebuilt" in shown["reason"]
    assert {a["state"] for a in shown["attempts"]} == {"published"}
    assert check(january, "--checksums")["clean"]
    cli(january, "verify", "--rebuild-ledger", code=2)  # the ledger is not empty any more
    cli(january, "run", "daily_revenue", "--partition", "2025-02-01")
    assert check(january)["clean"]


def test_a_deleted_ledger_folder_is_refused_and_a_new_project_is_not(
    january: Path, tmp_path: Path
) -> None:
    shutil.rmtree(january / ".tidegate")
    refused = tidegate("status", "--project", january)
    assert refused.exit_code == 2 and LOST in refused.stderr
    fresh = example_project(tmp_path / "fresh", rows_per_day=4, deploy=False)
    assert tidegate("status", "--project", fresh).exit_code == 0
    assert tidegate("build", "--project", fresh).exit_code == 0


def test_a_lost_definition_gets_a_placeholder_that_never_runs(january: Path) -> None:
    model = january / "models" / "daily_revenue.sql"
    model.write_text(model.read_text().replace("count(*)", "count(order_id)"))
    (january / ".tidegate" / "state.db").write_bytes(b"")
    rebuilt = check(january, "--rebuild-ledger")["rebuilt"]
    # the month's version is a fingerprint over the day's too: both definitions are lost
    assert len(rebuilt["versions_lost"]) == 2 and rebuilt["versions_matched"] == []
    assert rebuilt["activated"] == {}
    [(lost,)] = ledger(
        january,
        "SELECT version_id FROM versions WHERE model = 'daily_revenue' "
        "AND fingerprint LIKE 'lost definition %'",
    )
    assert lost in rebuilt["versions_lost"]
    cli(january, "deploy", "daily_revenue")
    [(run_id,)] = ledger(
        january, "SELECT DISTINCT run_id FROM attempts WHERE model = 'daily_revenue'"
    )
    refused = tidegate(
        "rerun", run_id, "--model", "daily_revenue", "--partitions", "2025-01-01",
        "--version", lost, "--approve", "test", "--project", january,
    )  # fmt: skip
    assert refused.exit_code == 3 and "definition was lost" in refused.stderr, refused.stderr
    stale = cli(january, "status", "daily_revenue").json()["models"][0]["partitions"]
    assert (stale["published"], stale["stale"]) == (0, 31)
    backfill(january, "daily_revenue", JANUARY, "--stale-only")
    assert check(january, "daily_revenue", "--checksums")["clean"]


@pytest.mark.parametrize(
    "args",
    [
        ("no_such_model",),
        ("daily_revenue", "--partitions", "2025-01-31..2025-01-01"),
        ("daily_revenue", "--partitions", "2025-13-01"),
        ("--partitions", "2025-01-01"),
        ("--checksums", "--sample", "0"),
        ("--sample", "3"),
        ("--repair", "--partitions", "2025-01-01"),
        ("--rebuild-ledger", "--repair"),
        ("--rebuild-ledger",),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    january: Path, args: tuple[str, ...]
) -> None:
    before = (state_dump(january), warehouse_dump(january))
    result = tidegate("verify", *args, "--project", january)
    assert result.exit_code == 2, result.stderr
    assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("error: ")
    assert (state_dump(january), warehouse_dump(january)) == before


def test_a_writer_holding_the_warehouse_makes_verify_busy(january: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
         "time.sleep(60)", str(january / "warehouse.duckdb")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        busy = tidegate("verify", "--project", january)
        assert busy.exit_code == 4 and "in use by another tidegate process" in busy.stderr
    finally:
        holder.kill()
        holder.wait()


JANUARY_15 = 1736899200  # 2025-01-15T00:00:00Z


@pytest.mark.parametrize("repaired_first", [False, True], ids=["start-up marks", "verify marks"])
@pytest.mark.parametrize("as_of", [None, "2025-02-01T03:00:00Z"], ids=["now", "as-of"])
def test_a_partition_republished_after_its_table_was_dropped_is_no_longer_marked(
    january: Path, as_of: str | None, repaired_first: bool
) -> None:
    """The dropped table's partitions are marked missing, by `verify --repair` at today's date
    or by the run's own start-up check; the partition the run then republishes is right again,
    whatever clock the run is on (`--as-of` fixes its every instant, the start-up mark's too,
    and puts it before today's), while the others stay marked."""
    warehouse_execute(january, "DROP TABLE daily_revenue")
    if repaired_first:
        check(january, "--repair", code=1)
    clock = ("--as-of", as_of) if as_of else ()
    cli(january, "run", "daily_revenue", "--partition", "2025-01-15", *clock)
    still = ledger(
        january,
        "SELECT partition_start FROM tainted_partitions WHERE cleared_at IS NULL "
        "AND model = 'daily_revenue'",
    )
    assert len(still) == 30
    assert JANUARY_15 not in {start for (start,) in still}
    # the warehouse holds what the ledger records, and verify says what is still marked
    found = check(january)
    assert found["clean"] and found["marked"] == {"daily_revenue": {"missing": 30}}
    human = tidegate("verify", "--project", january)
    assert human.exit_code == 0, human.stderr
    assert (
        "daily_revenue: the ledger marks 30 missing partition(s) not right; "
        "`tidegate recover daily_revenue` recomputes them"
    ) in " ".join(human.stdout.split())
