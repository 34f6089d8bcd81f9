"""The control plane's own scale: a dry-run over 1,000,000 hourly partitions, and `status` over a
ledger holding 1,000,000 published partitions. Prints wall time and peak memory of each command.

Usage: python benchmarks/control_plane_scale.py [PARTITIONS]
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

HOURLY_MODEL = """/* tidegate
grain = "hour"
time_column = "hour"
start = "2000-01-01T00"

[columns]
hour = "TIMESTAMP NOT NULL"
events = "BIGINT NOT NULL"
*/
SELECT date_trunc('hour', ts) AS hour, count(*) AS events
FROM events WHERE ts >= $start AND ts < $end
GROUP BY date_trunc('hour', ts)
"""
PROJECT = """[project]
name = "scale"

[sources.events]
time_column = "ts"
"""
FIRST_HOUR = 946684800  # 2000-01-01T00:00:00Z


def tidegate(project: Path, *args: str) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one tidegate command."""
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "tidegate", *args, "--project", str(project)],
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(process.pid, 0)
    assert status == 0, f"tidegate {' '.join(args)} failed"
    return time.perf_counter() - began, usage.ru_maxrss


def fill_ledger(project: Path, partitions: int) -> None:
    """Record `partitions` published hourly partitions, as a long history would."""
    con = sqlite3.connect(project / ".tidegate" / "state.db")
    version = con.execute("SELECT active_version FROM model_state").fetchone()[0]
    con.execute(
        "INSERT INTO runs (run_id, kind, models, partitions, params, requester, status, "
        "started_at) VALUES ('run-bench', 'backfill', '[]', 'all', '{}', 'bench', "
        "'succeeded', '2025-01-01')"
    )
    rows = (
        (
            "hourly_events",
            "hour",
            FIRST_HOUR + i * 3600,
            FIRST_HOUR + (i + 1) * 3600,
            version,
            "run-bench",
            f"att-{i}",
            1,
            "1:0000000000000001",
            "2025-01-01",
            f"att-{i}",
            "published",
        )
        for i in range(partitions)
    )
    con.executemany(
        "INSERT INTO partitions (model, grain, partition_start, partition_end, version_id, "
        "run_id, attempt_id, row_count, checksum, published_at, last_attempt_id, last_state) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    con.commit()
    con.close()


def main() -> None:
    partitions = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "tidegate.toml").write_text(PROJECT)
        (project / "models").mkdir()
        (project / "models" / "hourly_events.sql").write_text(HOURLY_MODEL)
        con = duckdb.connect(str(project / "warehouse.duckdb"))
        con.execute(
            "CREATE TABLE events AS SELECT TIMESTAMP '2000-01-01' + to_seconds(i * 37) AS ts "
            "FROM range(100000) AS t(i)"
        )
        con.close()
        tidegate(project, "build")
        tidegate(project, "deploy", "hourly_events")
        last = time.strftime("%Y-%m-%dT%H", time.gmtime(FIRST_HOUR + (partitions - 1) * 3600))
        seconds, rss = tidegate(
            project,
            "backfill",
            "hourly_events",
            "--partitions",
            f"2000-01-01T00..{last}",
            "--batch-size",
            "24",
            "--dry-run",
        )
        print(
            f"dry-run of {partitions:,} hourly partitions: {seconds:.2f} s, "
            f"peak {rss / 1024:.0f} MiB"
        )
        began = time.perf_counter()
        fill_ledger(project, partitions)
        print(
            f"(ledger filled with {partitions:,} published partitions in "
            f"{time.perf_counter() - began:.1f} s)"
        )
        for args in (("status",), ("status", "hourly_events")):
            seconds, rss = tidegate(project, *args, "--json")
            print(
                f"tidegate {' '.join(args)} over {partitions:,} partitions: {seconds:.2f} s, "
                f"peak {rss / 1024:.0f} MiB"
            )


if __name__ == "__main__":
    main()
