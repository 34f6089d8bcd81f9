"""The `--json` contract of every command: stdout holds exactly one JSON document, whose "schema"
names a schema file (src/tidegate/schemas) and which validates against it — when the command
succeeds, when its run fails or stops (its result document, the exit code telling it too), and
on a usage error (exit 2, one `tidegate.error/v1` document).

The commands are found by walking the click tree (a group's hidden `start` is its main form:
`backfill`, `recover`); a command added without a case here fails
`test_every_command_has_a_case`. One small project is driven through them all, in order; the
commands that need Iceberg tables (`restore`, `maintain`) run on a second one. `worker` needs a
shared PostgreSQL ledger: on the embedded default its case is its error document (tests/distributed
validates its result and events).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import click
import pytest

from tests.iceberg.kit import iceberg_project
from tests.kit import (
    Result,
    continued_until_exit,
    example_project,
    spawn,
    ui_until_listening,
    until_stopped,
)
from tests.kit import tidegate as run_cli
from tests.ops.test_json_schemas import documents, nested, schema_files, schema_name, validator
from tidegate.cli import cli as root_command
from tidegate.cli import subcommands
from tidegate.crash import ENVIRONMENT_VARIABLE

PAUSED_AFTER_FIRST_BATCH = {
    ENVIRONMENT_VARIABLE: "after_ledger:1",
    "TIDEGATE_CRASH_SIGNAL": "SIGSTOP",
}
CONSUMER = (
    '\n[[notify]]\nname = "finance_file"\nkind = "file"\npath = "notices.jsonl"\n'
    '\n[[consumers]]\nname = "finance"\nmodel = "daily_revenue"\nnotify = "finance_file"\n'
)

# each command -> what its cases exit with and the schema of the document each prints
EXPECTED: dict[str, list[tuple[int, str]]] = {
    "init": [(0, "init"), (2, "error")],
    "demo": [(0, "demo")],
    "build": [(0, "build")],
    "run": [(0, "run-result"), (1, "run-result")],
    "status": [(0, "status"), (2, "error")],
    "show partition": [(0, "partition")],
    "show run": [(0, "run"), (2, "error")],
    "history": [(0, "history")],
    "validate": [(0, "gate")],
    "deploy": [(0, "deploy")],
    "rollback": [(0, "rollback")],
    "pause": [(0, "pause")],
    "unpause": [(0, "pause")],
    "diff": [(0, "diff")],
    "backfill": [
        (0, "backfill-result"),
        (130, "backfill-result"),
        (0, "backfill-plan"),
        (0, "backfill-result"),
    ],
    "backfill resume": [(0, "backfill-result")],
    "backfill stop": [(2, "error"), (0, "backfill-stop")],
    "backfill list": [(0, "backfill-list")],
    "rerun": [(0, "rerun"), (0, "rerun")],
    "taint": [(0, "taint")],
    "recover": [(0, "recover-plan"), (130, "backfill-result")],
    "recover resume": [(0, "backfill-result")],
    "recover stop": [(0, "backfill-stop")],
    "ack": [(0, "ack")],
    "deliver": [(0, "deliver")],
    "verify": [(0, "verify")],
    "report": [(0, "report")],
    "ui": [(0, "ui")],
    "restore": [(0, "restore")],
    "maintain": [(0, "maintain")],
    "worker": [(2, "error")],
    "stream start": [(2, "error")],
    "stream stop": [(2, "error")],
}


def leaf_commands(group: click.Group = root_command, prefix: str = "") -> list[str]:
    """Every command a user runs, as typed: `show run`, `backfill` (its hidden `start`)."""
    found = []
    for name, command in subcommands(group).items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            found += leaf_commands(command, f"{path} ")
        elif command.hidden and name == "start" and prefix:
            found.append(prefix.strip())
        else:
            found.append(path)
    return found


class Runs:
    """What each command printed, in the order run."""

    def __init__(self) -> None:
        self.results: dict[str, list[Result]] = {}

    def record(self, command: str, result: Result) -> Any:
        self.results.setdefault(command, []).append(result)
        found = documents(result.stdout)
        return found[0] if len(found) == 1 else None

    def json(self, command: str, *args: str | Path) -> Any:
        """`tidegate ARGS --json` in this process, recorded as a case of `command`."""
        return self.record(command, run_cli(*args, "--json"))


def paused_run(*args: str | Path) -> tuple[Any, str]:
    """A backfill-like command as a real process with --json, stopped (SIGSTOP) right after
    its first batch's checkpoint: the process and its run id (its start event, on stderr)."""
    process = spawn(*args, "--json", "--events", "jsonl", env=PAUSED_AFTER_FIRST_BATCH)
    until_stopped(process.pid)
    assert process.stderr is not None
    start = json.loads(process.stderr.readline())
    assert start["event"] == "start", start
    return process, str(start["run_id"])


def stopped_by_request(runs: Runs, command: str, group: str, args: tuple[str, ...]) -> str:
    """`group stop` asked while the run is paused after its first batch, and Ctrl-C (the stop
    request is read from the ledger only every half second): it ends stopped (130) and prints
    its one result document. Its run id."""
    process, run_id = paused_run(*args)
    try:
        runs.json(f"{group} stop", group, "stop", run_id, *args[-2:])
        os.kill(process.pid, signal.SIGINT)  # handled as soon as it continues
        code = continued_until_exit(process.pid)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=60)
    runs.record(command, Result(code, stdout, stderr))
    return run_id


def drive(runs: Runs, root: Path) -> None:
    project = example_project(root / "orders")
    p = ("--project", str(project))
    config = project / "tidegate.toml"
    config.write_text(config.read_text() + CONSUMER)
    runs.json("init", "init", root / "empty")
    runs.json("init", "init", root / "both", "--dbt", root, "--example", "orders")
    runs.json("build", "build", *p)
    ran = runs.json("run", "run", "daily_revenue", "--partition", "2025-01-01..2025-01-03", *p)
    runs.json("run", "run", "monthly_revenue", "--partition", "2025-01", *p)  # skipped: failed
    runs.json("status", "status", *p)
    runs.json("status", "status", "no_such_model", *p)
    runs.json("show partition", "show", "partition", "daily_revenue", "2025-01-01", *p)
    runs.json("show run", "show", "run", ran["run_id"], *p)
    runs.json("show run", "show", "run", "run-20250101T000000000000Z-abcdef", *p)
    runs.json("history", "history", "daily_revenue", *p)

    # a second version of daily_revenue: validate, deploy, diff and roll back between the two
    model = project / "models" / "daily_revenue.sql"
    model.write_text(model.read_text().replace("count(*)", "count(order_id)"))
    run_cli("build", *p)
    week = ("--partitions", "2025-01-02..2025-01-03")
    runs.json("validate", "validate", "daily_revenue", *week, *p)
    runs.json("deploy", "deploy", "daily_revenue", *p)
    runs.json("diff", "diff", "daily_revenue", "--left", "v1", "--right", "v2", *week, *p)
    runs.json("rollback", "rollback", "daily_revenue", *p)
    runs.json("pause", "pause", "daily_revenue", "--reason", "incident", *p)
    runs.json("unpause", "unpause", "daily_revenue", *p)

    backfilled = runs.json("backfill", "backfill", "daily_revenue", *week, *p)
    runs.json("backfill resume", "backfill", "resume", backfilled["run_id"], *p)
    runs.json("backfill stop", "backfill", "stop", backfilled["run_id"], *p)  # not running: 2
    one_by_one = ("--batch-size", "1", *p)
    span = ("backfill", "daily_revenue", "--partitions", "2025-01-04..2025-01-06", *one_by_one)
    stopped_by_request(runs, "backfill", "backfill", span)
    runs.json("backfill", *span[:4], "--dry-run", *one_by_one)
    runs.json("backfill list", "backfill", "list", *p)
    runs.json("rerun", "rerun", "daily_revenue", *week, "--approve", "reloaded", *p)

    runs.json("taint", "taint", "daily_revenue", *week, "--reason", "loaded twice", *p)
    runs.json("recover", "recover", "daily_revenue", "--dry-run", *p)
    recovery = stopped_by_request(
        runs, "recover", "recover", ("recover", "daily_revenue", *one_by_one)
    )
    runs.json("recover resume", "recover", "resume", recovery, *p)
    runs.json("ack", "ack", "finance", "daily_revenue", *week, *p)
    runs.json("deliver", "deliver", *p)
    runs.json("verify", "verify", *p)
    runs.json("report", "report", "--out", root / "report.html", *p)
    runs.json("worker", "worker", "--exit-when-idle", *p)  # the embedded default: refused
    # a stream's supervisor (tests/flink validates its documents): not a stream model here
    runs.json("stream start", "stream", "start", "daily_revenue", *p)
    runs.json("stream stop", "stream", "stop", "daily_revenue", *p)

    # `ui` serves until stopped: its one document once it listens
    runs.record("ui", ui_until_listening(*p))
    runs.json("demo", "demo", "--rows-per-day", "2")

    lake = iceberg_project(root / "lake", rows_per_day=5)
    i = ("--project", str(lake))
    first = runs.json("backfill", "backfill", "daily_revenue", *week, *i)
    runs.json("rerun", "rerun", "daily_revenue", *week, *i)
    runs.json(
        "restore",
        *("restore", "daily_revenue", *week, "--to", first["run_id"], "--approve", "x", *i),
    )
    runs.json("maintain", "maintain", "--dry-run", "--as-of", "2099-01-01T00:00:00Z", *i)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    found = Runs()
    drive(found, tmp_path_factory.mktemp("contract"))
    return found


def test_every_command_has_a_case() -> None:
    commands = leaf_commands()
    assert len(commands) == len(set(commands))
    assert set(commands) == set(EXPECTED), "a command without a --json case, or a stale case"


def assert_one_valid_document(result: Result, schema: str) -> dict[str, Any]:
    found = documents(result.stdout)
    assert len(found) == 1, result.stdout
    [document] = found
    assert schema_name(document) == schema, (document, result.stderr)
    assert schema in schema_files()
    for inner in nested(document):
        errors = list(validator(schema_name(inner)).iter_errors(inner))
        assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    return document


@pytest.mark.parametrize("command", list(EXPECTED))
def test_json_prints_one_document_of_its_schema(runs: Runs, command: str) -> None:
    results = runs.results.get(command, [])
    assert [(r.exit_code, schema_name(documents(r.stdout)[0])) for r in results] == EXPECTED[
        command
    ], [(r.exit_code, r.stdout[-500:], r.stderr[-500:]) for r in results]
    for result, (code, schema) in zip(results, EXPECTED[command], strict=True):
        document = assert_one_valid_document(result, schema)
        if code == 130:  # Ctrl-C: said once on stderr (after its events), not as an error
            said = [line for line in result.stderr.splitlines() if not line.startswith("{")]
            assert len(said) == 1, result.stderr
            assert said[0].startswith("stopped on request (Ctrl-C)"), result.stderr
        elif code != 0:  # what failed is one line on stderr too
            assert result.stderr.splitlines()[-1].startswith("error: "), result.stderr
        if schema == "error":
            assert document["exit_code"] == code


@pytest.mark.parametrize("command", list(EXPECTED))
def test_a_usage_error_prints_one_error_document(command: str) -> None:
    result = run_cli(*command.split(), "--no-such-option", "--json")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    document = assert_one_valid_document(result, "error")
    assert document["exit_code"] == 2 and "--no-such-option" in document["error"]
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
