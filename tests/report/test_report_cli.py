"""`tidegate report --out FILE.html`: one file, the ledger's counts, bad input in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_startup import imported_heavy
from tests.kit import state_dump, tidegate
from tests.report.kit import AS_OF, HOSTILE, MODEL, TAINT_REASON, mixed_project, ok
from tidegate.domain.attempt import RunStatus
from tidegate.domain.backfill import BackfillPlan
from tidegate.domain.ids import new_run_id
from tidegate.domain.partitions import Grain, parse_partition
from tidegate.domain.run import Run
from tidegate.state.sqlite import SQLiteStateStore


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mixed_project(tmp_path_factory.mktemp("report") / "proj")


def data_of(page: str) -> dict[str, Any]:
    found = re.search(
        r'<script type="application/json" id="tidegate-data">(.*?)</script>', page, re.DOTALL
    )
    assert found is not None
    document: dict[str, Any] = json.loads(found[1])
    return document


def test_the_report_counts_what_status_counts(mixed: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    document = ok("report", "--out", out, "--as-of", AS_OF, "--project", mixed)
    assert document["path"] == str(out.resolve()) and document["bytes"] == out.stat().st_size
    status = ok("status", "--as-of", AS_OF, "--project", mixed)
    for shown, counted in zip(document["models"], status["models"], strict=True):
        assert shown["model"] == counted["model"]
        mine, theirs = shown["counts"], counted["partitions"]
        # a tainted partition is drawn as tainted; status counts it as published and tainted
        assert mine["published"] + mine["tainted"] == theirs["published"], shown["model"]
        assert mine["tainted"] == theirs.get("tainted", 0)
        assert (mine["stale"], mine["failed"], mine["running"]) == (
            theirs["stale"],
            theirs["failed"],
            theirs["running"],
        )
        assert sum(v for k, v in mine.items() if k != "missing") == theirs["known"]
    daily = document["models"][0]["counts"]
    assert daily == {
        "published": 7,  # 2025-02-01..09 by v2, less the two tainted days
        "stale": 5,  # 2025-03-01..05 by v1
        "tainted": 2,
        "failed": 1,  # 2025-02-10: v2's check
        "skipped": 0,
        "running": 0,
        "queued": 0,
        "missing": 103 - 15,  # due by 2025-04-15 (through 04-13 at 02:00) and never tried
    }
    assert document["models"][1]["counts"]["skipped"] == 1


def test_the_page_holds_the_data_and_no_user_markup(mixed: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    ok("report", "--out", out, "--as-of", AS_OF, "--project", mixed)
    page = out.read_text()
    assert page.count("<script") == 3 and "<b>not bold" not in page and "<img" not in page
    data = data_of(page)
    assert {e["reason"] for e in data["events"]} >= {HOSTILE, TAINT_REASON}
    [taint] = data["taints"]
    assert (taint["model"], taint["ranges"], taint["reason"]) == (
        MODEL,
        ["2025-02-03..2025-02-04"],
        TAINT_REASON,
    )
    assert data["as_of"] == "2025-04-15T00:00:00Z"
    [backfill] = [r for r in data["runs"] if r["kind"] == "backfill"]
    to_the_second = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
    assert to_the_second.match(backfill["started_at"]) and to_the_second.match(backfill["ended_at"])
    assert all(to_the_second.match(e["at"]) for e in data["events"])
    assert re.match(r"^[\d,.]+ partitions/min$", backfill["throughput"])
    assert backfill["trigger"].startswith("check_failure at 2025-02-10")
    assert backfill["attempts"]["published"] == 9 and backfill["per_minute"] > 0
    assert {c["partition"] for c in data["failing_checks"]} == {"2025-02-10"}
    assert {n["what"] for n in data["notices"]} == {"notice published", "notice taint"}
    assert all(n["consumers"] == ["finance"] for n in data["notices"])
    daily = data["models"][0]
    assert daily["health"]["line"] == (
        "daily_revenue: 7 published · 5 stale · 2 tainted · 1 failed · 88 missing"
    )
    shown = ok("show", "partition", MODEL, "2025-02-05", "--project", mixed)["published"]
    at = (1738713600 - daily["first"]) // 86400  # 2025-02-05
    assert data["run_ids"][daily["details"]["run"][at]] == shown["run_id"]
    assert daily["details"]["checksum"][at] == shown["checksum"]


def test_a_running_backfill_queues_what_it_has_yet_to_write(project: Path, tmp_path: Path) -> None:
    p = ("--project", project)
    ok("run", MODEL, "--partition", "2025-01-01..2025-01-02", *p)
    jan = [parse_partition(f"2025-01-{d:02}", Grain.DAY).start for d in (3, 13)]
    store = SQLiteStateStore(project / ".tidegate" / "state.db")
    try:
        version = store.active_version(MODEL)
        assert version is not None
        plan = BackfillPlan(MODEL, version.version_id, Grain.DAY, ((jan[0], jan[1]),))
        run_id = new_run_id()
        at = "2025-04-14T23:00:00.000000+00:00"
        store.create_run(
            Run(run_id, "backfill", (MODEL,), "2025-01-03..2025-01-12", "alice",
                RunStatus.RUNNING, at, plan=plan.to_json())
        )  # fmt: skip
        out = tmp_path / "report.html"
        counts = ok("report", "--out", out, "--as-of", AS_OF, *p)["models"][0]["counts"]
        assert (counts["queued"], counts["published"]) == (10, 2)
        store.finish_run(run_id, RunStatus.STOPPED, None, at)
        counts = ok("report", "--out", out, "--as-of", AS_OF, *p)["models"][0]["counts"]
        assert counts["queued"] == 0
    finally:
        store.close()


def test_the_report_reads_the_ledger_only(mixed: Path, tmp_path: Path) -> None:
    before = state_dump(mixed)
    assert (
        imported_heavy("report", "--out", str(tmp_path / "r.html"), "--project", str(mixed)) == []
    )
    assert state_dump(mixed) == before


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("missing/report.html", "does not exist"),
        (".", "is a directory"),
    ],
)
def test_a_bad_out_is_one_line_and_exit_2(
    mixed: Path, tmp_path: Path, where: str, says: str
) -> None:
    result = tidegate("report", "--out", tmp_path / where, "--project", mixed)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert says in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "missing").exists()


def test_an_unwritable_out_is_one_line_and_exit_2(mixed: Path, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = tidegate("report", "--out", locked / "r.html", "--project", mixed)
    finally:
        locked.chmod(0o700)
    if result.exit_code == 0:  # root writes anywhere: nothing to refuse
        assert (locked / "r.html").exists()
        return
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert list(locked.iterdir()) == []  # no half-written temporary left behind
