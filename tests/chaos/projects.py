"""The embedded projects the chaos campaign and the concurrency tests start from: fresh (built,
deployed, nothing published) and buggy (a range published by a buggy version whose every check
passes, the fixed version active again), with the clean and the buggy outputs."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.chaos.harness import (
    MODEL,
    Outputs,
    Partitions,
    clean_checksums,
    newest_run,
    target,
)
from tests.chaos.stores import Stores
from tests.kit import FORCED, example_project, tidegate

RANGE = "2025-01-01..2025-01-12"
ROWS_PER_DAY = 6
# the buggy version: refunded orders grouped with the completed ones
BUGGY = (
    (
        "    status,\n",
        "    CASE WHEN status = 'refunded' THEN 'completed' ELSE status END AS status,\n",
    ),
    ("GROUP BY CAST(order_ts AS DATE), status", "GROUP BY 1, 2"),
)


def ok(project: Path, *args: str) -> str:
    done = tidegate(*args, "--project", project)
    assert done.exit_code == 0, (args, done.stderr)
    return done.stdout


@dataclass(frozen=True)
class Fixtures:
    fresh: Path  # built and deployed, nothing published
    buggy: Path  # RANGE published by the buggy version, the fixed one active again
    buggy_run: str
    clean: Partitions
    checksums: dict[int, str]
    wrong: Partitions
    wrong_checksums: dict[int, str]

    @property
    def outputs(self) -> list[Outputs]:
        """The clean and the buggy version's outputs, for the green check."""
        return [Outputs(self.clean, self.checksums), Outputs(self.wrong, self.wrong_checksums)]


def build_fixtures(root: Path) -> Fixtures:
    """The embedded projects of the campaign, and the clean and buggy outputs over RANGE."""
    fresh = example_project(root / "fresh", rows_per_day=ROWS_PER_DAY)
    clean = root / "clean"
    shutil.copytree(fresh, clean)
    ok(clean, "backfill", MODEL, "--partitions", RANGE)
    buggy = root / "buggy"
    shutil.copytree(fresh, buggy)
    source = buggy / "models" / f"{MODEL}.sql"
    text = source.read_text()
    for old, new in BUGGY:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    source.write_text(text)
    ok(buggy, "build")
    ok(buggy, "deploy", MODEL, *FORCED)
    ok(buggy, "backfill", MODEL, "--partitions", RANGE)
    ok(buggy, "rollback", MODEL)
    found = newest_run(Stores(buggy), "backfill")
    assert found is not None
    buggy_run = found[0]
    wrong = target(Stores(buggy))
    assert wrong != target(Stores(clean)), "the buggy version must change some partition"
    return Fixtures(
        fresh,
        buggy,
        buggy_run,
        target(Stores(clean)),
        clean_checksums(Stores(clean)),
        wrong,
        clean_checksums(Stores(buggy)),
    )
