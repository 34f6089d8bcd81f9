"""Every `--json` document matches the versioned JSON Schema its "schema" field names.

One real project is driven through init, build, deploy, successful, skipped and failing runs,
status, show and history, plus the demo and an error; a second one through backfills (dry run,
succeeded, halted by a stop-loss, with skipped partitions, stopped on request, list, show run).
Every document printed is validated: `--json` prints exactly one on stdout, whatever the command
and its outcome (a backfill's or a recovery's is its result, backfill-result). The progress
events of the backfills and the recovery (their --events-file, or --events jsonl on stderr) are
validated too, each line against backfill-event.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

import tidegate
from tests.kit import FORCED, Result, example_project, spawn, tidegate_events, ui_until_listening
from tests.kit import tidegate as run_cli

SCHEMAS = Path(tidegate.__file__).parent / "schemas"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
FAILING_CHECK = (
    '[[checks]]\nname = "never_negative"\ntype = "expression"\nexpression = "order_count < 0"\n'
)

# label of each command run below -> the schema of the document it prints
PRODUCED = {
    "init example": "init",
    "init empty": "init",
    "build": "build",
    "deploy": "deploy",
    "deploy again": "deploy",
    "run published": "run-result",
    "run skipped": "run-result",
    "run reading a model": "run-result",
    "build with a failing check": "build",
    "validate failed": "gate",
    "diff": "diff",
    "deploy with a failing check": "deploy",
    "run failed check": "run-result",
    "rerun dry run": "rerun",
    "rerun": "rerun",
    "show run rerun": "run",
    "status": "status",
    "status MODEL": "status",
    "show partition stale": "partition",
    "show partition failed": "partition",
    "show partition skipped": "partition",
    "show partition published": "partition",
    "show run succeeded": "run",
    "show run failed": "run",
    "history": "history",
    "report": "report",
    "ui": "ui",
    "deliver": "deliver",
    "backfill dry run": "backfill-plan",
    "backfill halted by a stop-loss": "backfill-result",
    "backfill with skipped partitions": "backfill-result",
    "show run backfill halted": "run",
    "backfill succeeded": "backfill-result",
    "rerun model": "rerun",
    "show run rerun model": "run",
    "backfill resume succeeded": "backfill-result",
    "backfill stop": "backfill-stop",
    "backfill stopped": "backfill-result",
    "show run backfill stopped": "run",
    "backfill list": "backfill-list",
    "taint": "taint",
    "recover dry run": "recover-plan",
    "recover": "backfill-result",
    "show run recover": "run",
    "history recovered": "history",
    "ack": "ack",
    "verify": "verify",
    "validate passed": "gate",
    "rollback": "rollback",
    "pause": "pause",
    "unpause": "pause",
    "error": "error",
    "demo": "demo",
}


def schema_files() -> dict[str, dict[str, Any]]:
    return {
        path.name.removesuffix(".v1.json"): json.loads(path.read_text())
        for path in sorted(SCHEMAS.glob("*.v1.json"))
    }


REGISTRY: Registry = Registry().with_resources(
    (schema["$id"], Resource.from_contents(schema)) for schema in schema_files().values()
)


def schema_name(document: dict[str, Any]) -> str:
    value = document["schema"]
    assert value.startswith("tidegate.") and value.endswith("/v1"), value
    return str(value.removeprefix("tidegate.").removesuffix("/v1"))


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(schema_files()[name], registry=REGISTRY)


def documents(stdout: str) -> list[dict[str, Any]]:
    """Every JSON document on stdout, in order (there should be exactly one)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while at < len(stdout):
        if stdout[at].isspace():
            at += 1
            continue
        document, at = decoder.raw_decode(stdout, at)
        found.append(document)
    return found


def nested(document: Any) -> Iterator[dict[str, Any]]:
    """The document and every object inside it that carries a "schema" field."""
    if isinstance(document, dict):
        if "schema" in document:
            yield document
        for value in document.values():
            yield from nested(value)
    elif isinstance(document, list):
        for value in document:
            yield from nested(value)


def add_failing_check(project: Path) -> None:
    path = project / "models" / "daily_revenue.sql"
    header, end, sql = path.read_text().partition("*/\n")
    path.write_text(header + FAILING_CHECK + end + sql)


class Outputs:
    """What each labelled command printed (and the progress events it wrote); a label may be
    used by several invocations."""

    def __init__(self) -> None:
        self.results: dict[str, list[Result]] = {}

    def cli(
        self, label: str, *args: str | Path, code: int = 0, events: bool = False
    ) -> list[dict[str, Any]]:
        """`tidegate ARGS --json`; with `events`, with an --events-file too (`Result.events`)."""
        result = tidegate_events(*args, "--json") if events else run_cli(*args, "--json")
        assert result.exit_code == code, (label, result.stderr)
        self.results.setdefault(label, []).append(result)
        return documents(result.stdout)

    def record(self, label: str, result: Result, code: int) -> list[dict[str, Any]]:
        """A command run elsewhere (a real process): check its exit and keep its output."""
        assert result.exit_code == code, (label, result.stderr)
        self.results.setdefault(label, []).append(result)
        return documents(result.stdout)

    def documents(self, label: str) -> list[dict[str, Any]]:
        return [d for result in self.results[label] for d in documents(result.stdout)]

    def events(self, label: str) -> list[dict[str, Any]]:
        """The progress events the label's commands wrote, in order."""
        return [e for result in self.results[label] for e in result.events]

    def first(self, label: str) -> dict[str, Any]:
        return documents(self.results[label][0].stdout)[0]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Outputs:
    root = tmp_path_factory.mktemp("schemas")
    out = Outputs()
    project = root / "orders"
    p = ("--project", project)
    out.cli("init example", "init", project, "--example", "orders", "--rows-per-day", "5")
    out.cli("init empty", "init", root / "empty")
    out.cli("build", "build", *p)
    for model in ("daily_revenue", "monthly_revenue", "revenue_report"):
        out.cli("deploy", "deploy", model, *p)
    out.cli("deploy again", "deploy", "daily_revenue", *p)
    [ok] = out.cli(
        "run published", "run", "daily_revenue", "--partition", "2025-02-01..2025-03-02", *p
    )
    out.cli("run skipped", "run", "monthly_revenue", "--partition", "2025-04", *p, code=1)
    out.cli("run reading a model", "run", "monthly_revenue", "--partition", "2025-02", *p)
    add_failing_check(project)
    out.cli("build with a failing check", "build", *p)
    out.cli(
        "validate failed",
        *("validate", "daily_revenue", "--partitions", "2025-03-01..2025-03-02", *p),
        code=1,
    )
    out.cli(
        "diff",
        *("diff", "daily_revenue", "--left", "v1", "--right", "v2"),
        *("--partitions", "2025-03-01..2025-03-02", *p),
    )
    out.cli("deploy with a failing check", "deploy", "daily_revenue", *FORCED, *p)
    failed = out.cli(
        "run failed check", "run", "daily_revenue", "--partition", "2025-03-03", *p, code=1
    )
    out.cli("rerun dry run", "rerun", failed[0]["run_id"], "--dry-run", *p)
    [rerun] = out.cli("rerun", "rerun", failed[0]["run_id"], *p, code=1)
    out.cli("show run rerun", "show", "run", rerun["run_id"], *p)
    out.cli("status", "status", *p)
    out.cli("status MODEL", "status", "daily_revenue", *p)
    out.cli("show partition stale", "show", "partition", "daily_revenue", "2025-03-01", *p)
    out.cli("show partition failed", "show", "partition", "daily_revenue", "2025-03-03", *p)
    out.cli("show partition skipped", "show", "partition", "monthly_revenue", "2025-04", *p)
    out.cli("show partition published", "show", "partition", "monthly_revenue", "2025-02", *p)
    out.cli("show run succeeded", "show", "run", ok["run_id"], *p)
    out.cli("show run failed", "show", "run", failed[0]["run_id"], *p)
    out.cli("history", "history", "daily_revenue", *p)
    out.cli("report", "report", "--out", root / "report.html", *p)
    listening(out, project)
    out.cli("deliver", "deliver", *p)
    backfills(out, project, root / "backfills")
    taints(out, root / "backfills")
    out.cli("validate passed", "validate", "daily_revenue", "--version", "v1", "--sample", "2", *p)
    out.cli("rollback", "rollback", "daily_revenue", *p)
    out.cli("pause", "pause", "daily_revenue", "--reason", "incident", *p)
    out.cli("unpause", "unpause", "daily_revenue", *p)
    out.cli("error", "status", "no_such_model", *p, code=2)
    out.cli("demo", "demo", "--rows-per-day", "5")
    return out


def listening(out: Outputs, project: Path) -> None:
    """`tidegate ui --json` prints one line once it listens, then serves until stopped."""
    out.record("ui", ui_until_listening("--project", project), 0)


def backfills(out: Outputs, project: Path, fresh: Path) -> None:
    """Every backfill document: `project` has the failing check deployed, `fresh` is clean."""
    p = ("--project", project)
    out.cli(
        "backfill dry run",
        *("backfill", "daily_revenue", "--partitions", "2025-03-04..2025-03-20"),
        *("--batch-size", "7", "--rate", "30/min", "--dry-run", *p),
    )
    halted = out.cli(
        "backfill halted by a stop-loss",
        *("backfill", "daily_revenue", "--partitions", "2025-03-04..2025-03-06", *p),
        code=1,
        events=True,
    )
    out.cli(
        "backfill with skipped partitions",
        *("backfill", "monthly_revenue", "--partitions", "2025-02..2025-04", *p),
        code=1,
        events=True,
    )
    out.cli("show run backfill halted", "show", "run", halted[0]["run_id"], *p)

    example_project(fresh, rows_per_day=5)
    f = ("--project", fresh)
    succeeded = out.cli(
        "backfill succeeded",
        *("backfill", "daily_revenue", "--partitions", "2025-01-01..2025-01-10", *f),
        *("--batch-size", "3", "--max-concurrency", "2"),
        events=True,
    )
    [model_rerun] = out.cli(
        "rerun model", "rerun", "daily_revenue", "--partitions", "2025-01-01..2025-01-02", *f
    )
    out.cli("show run rerun model", "show", "run", model_rerun["run_id"], *f)
    out.cli(
        "backfill resume succeeded",
        *("backfill", "resume", succeeded[0]["run_id"], *f),
        events=True,
    )
    # a whole year, one partition per batch: it is still running when the stop arrives; its
    # events on stderr (--events jsonl), to read its start as it happens
    process = spawn(
        *("backfill", "daily_revenue", "--partitions", "2025-01-11..2025-12-31", *f),
        *("--json", "--events", "jsonl"),
    )
    assert process.stderr is not None
    first = process.stderr.readline()
    started = json.loads(first)
    out.cli("backfill stop", "backfill", "stop", started["run_id"], *f)
    stdout, rest = process.communicate(timeout=120)
    *lines, error = (first + rest).splitlines()
    assert error.startswith("error: ") and "stopped on request" in error, error
    stream = tuple(json.loads(line) for line in lines)  # nothing else on stderr: every line
    out.record("backfill stopped", Result(process.returncode, stdout, error + "\n", stream), 5)
    out.cli("show run backfill stopped", "show", "run", started["run_id"], *f)
    out.cli("backfill list", "backfill", "list", *f)


def taints(out: Outputs, project: Path) -> None:
    """Taint, recovery and acknowledgement, on the project the backfills left published."""
    p = ("--project", project)
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text()
        + '\n[[notify]]\nname = "finance_file"\nkind = "file"\npath = "notices.jsonl"\n'
        + '\n[[consumers]]\nname = "finance"\nmodel = "daily_revenue"\nnotify = "finance_file"\n'
    )
    week = ("--partitions", "2025-01-01..2025-01-03")
    out.cli("taint", "taint", "daily_revenue", *week, "--reason", "loaded twice", *p)
    out.cli("recover dry run", "recover", "daily_revenue", "--dry-run", *p)
    recovered = out.cli("recover", "recover", "daily_revenue", *p, events=True)
    out.cli("show run recover", "show", "run", recovered[-1]["run_id"], *p)
    out.cli("history recovered", "history", "daily_revenue", *p)
    out.cli("ack", "ack", "finance", "daily_revenue", *week, *p)
    out.cli("verify", "verify", "--checksums", *p)


def test_every_command_was_run(outputs: Outputs) -> None:
    assert list(outputs.results) == list(PRODUCED)


def variants(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The object shapes a schema allows: itself, or each branch of a top-level oneOf (a
    JSON-lines stream has one shape per event kind)."""
    if "oneOf" not in schema:
        return [schema]
    found = []
    for branch in schema["oneOf"]:
        ref = branch["$ref"]
        assert ref.startswith("#/$defs/"), ref
        found.append(schema["$defs"][ref.removeprefix("#/$defs/")])
    return found


@pytest.mark.parametrize("name", sorted(schema_files()))
def test_schema_file_is_a_valid_strict_draft_2020_12_schema(name: str) -> None:
    schema = schema_files()[name]
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == DRAFT
    assert schema["$id"] == f"urn:tidegate:schema:{name}:v1"
    for shape in variants(schema):
        assert shape["properties"]["schema"] == {"const": f"tidegate.{name}/v1"}
        assert shape["additionalProperties"] is False
        assert set(shape["required"]) == set(shape["properties"])


@pytest.mark.parametrize("label", list(PRODUCED))
def test_output_matches_its_schema(outputs: Outputs, label: str) -> None:
    printed = [documents(result.stdout) for result in outputs.results[label]]
    assert printed and all(found and schema_name(found[0]) == PRODUCED[label] for found in printed)
    for document in outputs.documents(label):
        for inner in nested(document):
            errors = list(validator(schema_name(inner)).iter_errors(inner))
            assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]


# labels whose commands wrote progress events, and the schema of each line
EVENTS = {
    "backfill halted by a stop-loss": "backfill-event",
    "backfill with skipped partitions": "backfill-event",
    "backfill succeeded": "backfill-event",
    "backfill resume succeeded": "backfill-event",
    "backfill stopped": "backfill-event",
    "recover": "backfill-event",
}


@pytest.mark.parametrize("label", list(EVENTS))
def test_events_match_their_schema(outputs: Outputs, label: str) -> None:
    stream = outputs.events(label)
    assert stream and {schema_name(e) for e in stream} == {EVENTS[label]}, stream
    check = validator(EVENTS[label])
    for event in stream:
        errors = list(check.iter_errors(event))
        assert not errors, (event, [f"{list(e.absolute_path)}: {e.message}" for e in errors])


def test_only_the_commands_asked_for_events_wrote_any(outputs: Outputs) -> None:
    assert {label for label, results in outputs.results.items() if results[0].events} == set(EVENTS)


def test_every_schema_value_has_a_file_and_every_file_is_exercised(outputs: Outputs) -> None:
    produced = {
        schema_name(inner)
        for label in outputs.results
        for document in outputs.documents(label) + outputs.events(label)
        for inner in nested(document)
    }
    files = set(schema_files())
    assert produced - files == set(), "documents whose schema has no file"
    # workers need a shared PostgreSQL ledger: tests/distributed validates their result and
    # events; restore and maintain need Iceberg tables: tests/iceberg/test_maintain.py
    # validates them; a detached backfill's document: tests/ops/test_detach.py; a stream's
    # supervisor needs PyFlink: tests/flink/test_release.py
    # (tests/ops/test_json_contract.py runs every command once more)
    expected_elsewhere = {
        "stream",
        "worker-result",
        "worker-event",
        "restore",
        "maintain",
        "backfill-detached",
    }
    assert files - produced == expected_elsewhere, "schema files no test exercises"
    assert files == {
        "stream",
        "backfill-detached",
        "worker-result",
        "worker-event",
        "restore",
        "maintain",
        "status",
        "partition",
        "run",
        "run-result",
        "build",
        "deploy",
        "gate",
        "diff",
        "rerun",
        "deliver",
        "rollback",
        "pause",
        "history",
        "report",
        "ui",
        "init",
        "demo",
        "error",
        "backfill-result",
        "backfill-event",
        "backfill-plan",
        "backfill-stop",
        "backfill-list",
        "taint",
        "recover-plan",
        "ack",
        "verify",
    }


def test_the_outputs_cover_the_states_the_schemas_enumerate(outputs: Outputs) -> None:
    """Otherwise a schema's enum could be wrong and no document would notice."""

    doc = outputs.first
    attempt_states = {
        p["state"]
        for label in ("run published", "run skipped", "run failed check")
        for p in doc(label)["partitions"]
    }
    assert attempt_states == {"published", "skipped", "failed"}
    assert doc("run published")["status"] == "succeeded"
    assert doc("run failed check")["status"] == "failed"
    assert doc("show partition stale")["state"] == "stale"
    assert doc("show partition failed")["state"] == "failed"
    assert doc("show partition skipped")["state"] == "skipped"
    published = doc("show partition published")
    assert published["state"] == "published"
    inputs = published["published"]["inputs"]
    assert [(i["upstream"], i["kind"], i["range"]) for i in inputs] == [
        ("daily_revenue", "model", "2025-02-01..2025-02-28")
    ]
    assert len(inputs[0]["attempts"]) == 28
    source_inputs = doc("show partition stale")["published"]["inputs"]
    assert [(i["upstream"], i["kind"]) for i in source_inputs] == [("orders", "source")]
    segments = {s["state"] for s in doc("status MODEL")["models"][0]["ranges"]}
    assert segments == {"stale", "failed"}
    # a changed check is a new version of its model only: downstream reads no check
    changes = {m["model"]: m["change"] for m in doc("build with a failing check")["models"]}
    assert changes == {
        "daily_revenue": "modified",
        "monthly_revenue": "unchanged",
        "revenue_report": "unchanged",
    }
    failed_checks = [
        c for c in doc("show partition failed")["last_attempt"]["checks"] if not c["passed"]
    ]
    assert [c["name"] for c in failed_checks] == ["never_negative"]
    assert doc("init empty")["example"] is None and doc("init empty")["orders_rows"] is None
    assert doc("init example")["orders_rows"] == 365 * 5
    assert doc("deploy again")["changed"] is False
    assert [d["model"] for d in outputs.documents("deploy")] == [
        "daily_revenue",
        "monthly_revenue",
        "revenue_report",
    ]
    assert doc("error")["exit_code"] == 2
    published_reconciliations = published["published"]["reconciliations"]
    assert [r["name"] for r in published_reconciliations] == ["orders", "net_revenue"]
    assert all(r["passed"] for r in published_reconciliations)
    # (tests/ops/test_history.py validates the `tainted_downstream` events: nothing here
    # read the tainted days downstream)
    assert {"taint", "recover"} <= {e["kind"] for e in doc("history recovered")["events"]}


def test_the_backfill_outputs_cover_what_their_schemas_enumerate(outputs: Outputs) -> None:
    events = {label: outputs.events(label) for label in EVENTS}
    for label, stream in events.items():
        kinds = [e["event"] for e in stream]
        if label == "backfill resume succeeded":  # a no-op: its one event is its end
            assert kinds == ["end"] and stream[0]["nothing_to_resume"] is True
        else:
            assert kinds[0] == "start" and kinds[-1] == "end", (label, kinds)
            # a recovery starts each model it recomputes
            assert set(kinds[1:-1]) <= {"partition", "start"}, (label, kinds)
            assert len({e["run_id"] for e in stream}) == 1, label
        # the result document on stdout is the end event's result
        [result] = outputs.documents(label)
        end = {k: v for k, v in stream[-1].items() if k not in ("schema", "event")}
        assert result == {"schema": "tidegate.backfill-result/v1", **end}, label
    ends = {label: stream[-1] for label, stream in events.items()}
    assert {e["status"] for e in ends.values()} == {"succeeded", "failed", "stopped"}
    states = {e["state"] for s in events.values() for e in s if e["event"] == "partition"}
    assert states == {"published", "failed", "skipped"}
    trigger = ends["backfill halted by a stop-loss"]["trigger"]
    assert trigger is not None and trigger["name"] == "check_failure"
    assert trigger["partition"] == "2025-03-04"
    assert ends["backfill succeeded"]["trigger"] is None

    doc = outputs.first
    plan = doc("backfill dry run")
    assert (plan["partitions"], plan["batches"], plan["rate_per_minute"]) == (17, 3, 30)
    assert plan["first_batches"] == [
        "2025-03-04..2025-03-10",
        "2025-03-11..2025-03-17",
        "2025-03-18..2025-03-20",
    ]
    halted = doc("show run backfill halted")
    assert halted["trigger"] is not None and halted["trigger"].startswith("check_failure at ")
    assert halted["plan"]["stop_loss"]["halt_on_check_failure"] is True
    assert [a["failed_checks"] for a in halted["attempts"]] == [["never_negative"]]
    stopped = doc("show run backfill stopped")
    assert stopped["status"] == "stopped"
    assert stopped["stop_requested_at"] is not None
    assert stopped["plan"]["selection"] and stopped["plan_hash"] is None
    listed = [r["status"] for r in doc("backfill list")["runs"]]
    assert listed == ["stopped", "succeeded"]  # newest first
    assert doc("backfill stop")["run_id"] == stopped["run_id"]


def mutated(document: dict[str, Any], path: list[str | int], value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(document))
    target = copy
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return copy


REGRESSIONS = {
    "status: unknown partition state": (
        "status MODEL",
        ["models", 0, "ranges", 0, "state"],
        "done",
    ),
    "status: a count goes missing": ("status", ["models", 0, "partitions", "stale"], KeyError),
    "status: an unexpected key": ("status", ["models", 0, "colour"], "red"),
    "partition: git_dirty as text": (
        "show partition stale",
        ["published", "version", "git_dirty"],
        "no",
    ),
    "partition: unknown attempt state": (
        "show partition failed",
        ["last_attempt", "state"],
        "exploded",
    ),
    "run-result: unknown run status": ("run published", ["status"], "ok"),
    "run-result: rows as a string": ("run published", ["partitions", 0, "rows"], "2"),
    "run: attempt without an id": ("show run failed", ["attempts", 0, "attempt_id"], KeyError),
    "build: unknown change kind": ("build", ["models", 0, "change"], "renamed"),
    "deploy: seq 0": ("deploy", ["seq"], 0),
    "history: deploy without gate": ("history", ["events", 1, "detail", "gate"], KeyError),
    "init: rows without an example": ("init empty", ["orders_rows"], 10),
    "demo: nested status is checked too": ("demo", ["status", "models", 0, "grain"], "week"),
    "error: a two-line message": ("error", ["error"], "first\nsecond"),
    "error: unknown exit code": ("error", ["exit_code"], 7),
    "wrong schema version": ("deploy", ["schema"], "tidegate.deploy/v2"),
    "partition: reconciliation passed as text": (
        "show partition published",
        ["published", "reconciliations", 0, "passed"],
        "yes",
    ),
    "run: unknown run status": ("show run backfill stopped", ["status"], "paused"),
    "run: trigger without a partition": (
        "show run backfill halted",
        ["trigger"],
        "check_failure",
    ),
    "run: plan batch size 0": ("show run backfill halted", ["plan", "batch_size"], 0),
    "run: stop-loss with an unknown key": (
        "show run backfill halted",
        ["plan", "stop_loss", "max_retries"],
        3,
    ),
    "run: attempt batch as text": ("show run backfill halted", ["attempts", 0, "batch"], "0"),
    "run: failed check names as one string": (
        "show run backfill halted",
        ["attempts", 0, "failed_checks"],
        "never_negative",
    ),
    "backfill-result: unknown status": ("backfill succeeded", ["status"], "done"),
    "backfill-result: an event's field": ("backfill succeeded", ["event"], "end"),
    "backfill-result: published missing": ("backfill succeeded", ["published"], KeyError),
    "backfill-result: trigger without a partition": (
        "backfill halted by a stop-loss",
        ["trigger", "partition"],
        KeyError,
    ),
    "backfill-result: nothing to resume as text": (
        "backfill resume succeeded",
        ["nothing_to_resume"],
        "yes",
    ),
    "backfill-plan: negative source rows": (
        "backfill dry run",
        ["source_rows", "orders"],
        -1,
    ),
    "backfill-plan: batches missing": ("backfill dry run", ["batches"], KeyError),
    "backfill-stop: not requested": ("backfill stop", ["stop_requested"], False),
    "backfill-list: unknown status": ("backfill list", ["runs", 0, "status"], "done"),
    "report: a state count goes missing": (
        "report",
        ["models", 0, "counts", "missing"],
        KeyError,
    ),
    "report: an unknown state": ("report", ["models", 0, "counts", "done"], 1),
    "ui: listening beyond this machine": ("ui", ["url"], "http://0.0.0.0:8765/"),
}


def test_backfill_events_reject_regressions(outputs: Outputs) -> None:
    """Each event kind is checked against its own shape, not the union of all of them; the
    end event's fields are the result document's (backfill-result), checked as strictly."""
    stream = outputs.events("backfill halted by a stop-loss")
    start, partition, end = stream[0], stream[1], stream[-1]
    check = validator("backfill-event")
    assert all(check.is_valid(e) for e in (start, partition, end))
    assert not check.is_valid(mutated(start, ["event"], "progress"))
    assert not check.is_valid(mutated(start, ["model"], KeyError))
    assert not check.is_valid(mutated(partition, ["event"], "start"))
    assert not check.is_valid(mutated(end, ["status"], "done"))
    assert not check.is_valid(mutated(end, ["nothing_to_resume"], KeyError))
    assert not check.is_valid(mutated(end, ["schema"], "tidegate.backfill-result/v1"))
    assert not check.is_valid(mutated(partition, ["state"], "audited"))
    assert not check.is_valid(mutated(end, ["trigger", "name"], "max_retries"))
    assert not check.is_valid(mutated(end, ["trigger", "partition"], KeyError))
    assert not check.is_valid(mutated(end, ["published"], -1))
    assert not check.is_valid(mutated(start, ["batch_size"], 0))


@pytest.mark.parametrize("case", list(REGRESSIONS))
def test_schemas_reject_regressions(outputs: Outputs, case: str) -> None:
    label, path, value = REGRESSIONS[case]
    document = outputs.first(label)
    name = schema_name(document)
    assert validator(name).is_valid(document)
    assert not validator(name).is_valid(mutated(document, path, value))


def test_json_stdout_is_one_document_even_when_the_run_fails(outputs: Outputs) -> None:
    """A script reads `--json` with one json.loads; a failed run must not print two documents."""
    failed = {
        "run skipped": ("tidegate.run-result/v1", "failed"),
        "run failed check": ("tidegate.run-result/v1", "failed"),
        "backfill halted by a stop-loss": ("tidegate.backfill-result/v1", "failed"),
        "backfill with skipped partitions": ("tidegate.backfill-result/v1", "failed"),
        "backfill stopped": ("tidegate.backfill-result/v1", "stopped"),
    }
    for label, (schema, status) in failed.items():
        [result] = outputs.results[label]
        document = json.loads(result.stdout)  # raises if stdout holds two documents
        assert (document["schema"], document["status"]) == (schema, status), label
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), label


# -- who wrote it: the git commit of every version ----------------------------------------


def git(project: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(project.parent),
    }
    done = subprocess.run(
        ["git", "-C", str(project), "-c", "commit.gpgsign=false", *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return done.stdout.strip()


def test_show_partition_names_the_commit_that_wrote_it(tmp_path: Path) -> None:
    project = example_project(tmp_path / "proj", deploy=False)
    git(project, "init", "-q", "-b", "main")
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "orders pipeline")
    head = git(project, "rev-parse", "HEAD")
    assert git(project, "status", "--porcelain") == ""  # .gitignore covers the warehouse

    p = ("--project", project)
    assert run_cli("build", *p).exit_code == 0
    assert run_cli("deploy", "daily_revenue", *p).exit_code == 0
    assert run_cli("run", "daily_revenue", "--partition", "2025-02-10", *p).exit_code == 0
    shown = run_cli("show", "partition", "daily_revenue", "2025-02-10", "--json", *p)
    assert shown.exit_code == 0, shown.stderr
    document = shown.json()
    assert validator("partition").is_valid(document)
    assert document["state"] == "published"
    written_by = document["published"]["version"]
    assert written_by["git_commit"] == head
    assert written_by["git_dirty"] is False

    model = project / "models" / "daily_revenue.sql"
    model.write_text(model.read_text().replace("count(*)", "count(order_id)"))
    rebuilt = run_cli("build", "--json", *p)
    assert rebuilt.exit_code == 0, rebuilt.stderr
    daily = next(m for m in rebuilt.json()["models"] if m["model"] == "daily_revenue")
    assert daily["created"] is True
    assert daily["version_id"] != written_by["id"]
    assert daily["git_commit"] == head
    assert daily["git_dirty"] is True
    # the partition still names the clean version that wrote it
    again = run_cli("show", "partition", "daily_revenue", "2025-02-10", "--json", *p).json()
    assert again["published"]["version"] == written_by
