"""Projects in every partition state, and a real `tidegate ui` process, for the report tests."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.kit import FORCED, example_project, spawn, tidegate

MODEL = "daily_revenue"
AS_OF = "2025-04-15T00:00:00Z"
HOSTILE = "<script>window.__pwned=1</script> & <b>not bold</b>"
TAINT_REASON = "<img src=x onerror=window.__pwned=2> loaded twice"
# v2 of daily_revenue: a blocking check that fails on one day only
FAILING_CHECK = (
    '[[checks]]\nname = "not_feb_10"\ntype = "expression"\n'
    "expression = \"order_date <> DATE '2025-02-10'\"\n"
)
NOTIFY = (
    '\n[[notify]]\nname = "finance_file"\nkind = "file"\npath = "notices.jsonl"\n'
    '\n[[consumers]]\nname = "finance"\nmodel = "daily_revenue"\nnotify = "finance_file"\n'
)


def ok(*args: str | Path, code: int = 0) -> dict[str, Any]:
    """Run `tidegate ARGS --json` in this process; check its exit; return its document."""
    result = tidegate(*args, "--json")
    assert result.exit_code == code, (args, result.stderr)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def add_failing_check(project: Path) -> None:
    """Build and (forcibly) deploy v2 of daily_revenue, whose check fails on 2025-02-10."""
    path = project / "models" / f"{MODEL}.sql"
    header, end, sql = path.read_text().partition("*/\n")
    path.write_text(header + FAILING_CHECK + end + sql)
    ok("build", "--project", project)
    ok("deploy", MODEL, *FORCED, "--project", project)


def staged_project(target: Path) -> Path:
    """The orders example in several partition states before any backfill: daily_revenue has
    2025-03-01..05 published by v1 and stale under the active v2, 2025-02-10 failed by v2's
    check; monthly_revenue 2025-04 skipped (its days are not published); a pause reason and
    a consumer notice hold text that looks like markup."""
    project = example_project(target, rows_per_day=5)
    with (project / "tidegate.toml").open("a") as config:
        config.write(NOTIFY)
    p = ("--project", project)
    ok("run", MODEL, "--partition", "2025-03-01..2025-03-05", *p)
    ok("run", "monthly_revenue", "--partition", "2025-04", *p, code=1)
    add_failing_check(project)
    ok("run", MODEL, "--partition", "2025-02-10", *p, code=1)
    ok("pause", MODEL, "--reason", HOSTILE, *p)
    ok("unpause", MODEL, *p)
    return project


def mixed_project(target: Path) -> Path:
    """`staged_project`, then a backfill of 2025-02-01..15 that publishes 02-01..09 with v2
    and halts at 02-10 (a check failure: the stop-loss fires there), and a taint on
    2025-02-03..04 whose reason holds markup."""
    project = staged_project(target)
    p = ("--project", project)
    result = tidegate("backfill", MODEL, "--partitions", "2025-02-01..2025-02-15", *p)
    assert result.exit_code == 1, result.stderr
    ok("taint", MODEL, "--partitions", "2025-02-03..2025-02-04", "--reason", TAINT_REASON, *p)
    return project


@dataclass
class UI:
    """A running `tidegate ui` process and where it listens."""

    process: subprocess.Popen[str]
    url: str

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any, str]:
        """(status, headers, body) of GET `path`."""
        return self.request("GET", path, headers)

    def request(
        self, method: str, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, str]:
        request = urllib.request.Request(self.url + path.lstrip("/"), method=method)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, answer.headers, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read().decode()


@contextmanager
def serving(project: Path, *extra: str) -> Iterator[UI]:
    """`tidegate ui --port 0 --json` on `project`: waits for the line saying where it listens;
    stopped on the way out."""
    process = spawn("ui", "--port", "0", "--json", "--project", project, *extra)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.communicate(timeout=30)[1]
        yield UI(process, json.loads(line)["url"])
    finally:
        process.terminate()
        process.communicate(timeout=30)
