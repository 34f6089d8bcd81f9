"""Human-readable output for the command line (rich tables). JSON documents are built by ops."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console, RenderableType
from rich.style import StyleType
from rich.table import Table as RichTable
from rich.text import Text

from tidegate.terminal import echo, one_line, printable

if TYPE_CHECKING:
    # types only: importing the writing commands would slow the ledger readers' start-up
    from tidegate.dbt.models import DbtProject
    from tidegate.domain.gate import Gate
    from tidegate.ops.build import Built
    from tidegate.ops.run import RunResult


class TerminalConsole(Console):
    """A rich console showing the control characters and bidi overrides of the text it prints
    as escapes (`tidegate.terminal.printable`). Every string printed and every text cell of a
    table becomes Text here, so this is the one place; the styles the console adds itself come
    later and still work."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(printable(text), **options)


class Table(RichTable):
    """A rich table whose text cells are one line each: a line break in a reason or an error
    is shown as `\\n`, not as a row of its own under the row it belongs to."""

    def add_row(
        self,
        *renderables: RenderableType | None,
        style: StyleType | None = None,
        end_section: bool = False,
    ) -> None:
        cells = [one_line(cell) if isinstance(cell, str) else cell for cell in renderables]
        super().add_row(*cells, style=style, end_section=end_section)


# Wide enough for ids and checksums when output goes to a file or a pipe.
# markup and emoji codes off: names, reasons and messages come from users, and "[x]" or
# ":warning:" in them is text
console = TerminalConsole(
    highlight=False, markup=False, emoji=False, width=None if sys.stdout.isatty() else 160
)


def built_doc(built: Built) -> dict[str, Any]:
    v = built.version
    return {
        "model": v.model,
        "version_id": v.version_id,
        "seq": v.seq,
        "fingerprint": v.fingerprint,
        "change": built.change.value,
        "created": built.created,
        "active_version": built.active_version,
        "git_commit": v.git_commit,
        "git_dirty": v.git_dirty,
    }


def build(built: list[Built], dbt: DbtProject | None = None) -> None:
    table = Table("model", "version", "fingerprint", "change", "note")
    for b in built:
        v = b.version
        change, note = build_row(b)
        table.add_row(v.model, f"v{v.seq}", v.version_id, change, note)
    console.print(table)
    if dbt is None:
        return
    echo(
        f"dbt project {dbt.folder} (dbt {dbt.dbt_version}, {dbt.adapter}): "
        f"{len(dbt.models)} model(s) controlled by tidegate"
    )
    if dbt.inlined:
        echo(f"  inlined by dbt into their readers (ephemeral): {', '.join(dbt.inlined)}")
    for item in dbt.left_to_dbt:
        echo(f"  left to dbt: {item.node}: {item.reason}")
    for item in dbt.tests_not_run:
        echo(f"  dbt test not run by tidegate: {item.node}: {item.reason}")


def dbt_doc(dbt: DbtProject) -> dict[str, Any]:
    return {
        "project": dbt.folder,
        "dbt_version": dbt.dbt_version,
        "adapter": dbt.adapter,
        "models": sorted(dbt.models),
        "inlined": list(dbt.inlined),
        "left_to_dbt": [{"node": i.node, "reason": i.reason} for i in dbt.left_to_dbt],
        "tests_not_run": [{"test": i.node, "reason": i.reason} for i in dbt.tests_not_run],
    }


def build_row(built: Built) -> tuple[str, str]:
    """What this build did to a model, and where its version stands. `change` compares a new
    version with the active one; a version built before is unchanged by this build, whatever
    it differs in from the active one (its note says it is not deployed)."""
    from tidegate.domain.model import ChangeKind

    if built.created:
        return built.change.value, "new version"
    if built.active_version == built.version.version_id:
        return ChangeKind.UNCHANGED.value, "active"
    if built.active_version is None:
        return ChangeKind.UNCHANGED.value, "already built; not deployed"
    active = f"v{built.active_seq}" if built.active_seq is not None else built.active_version
    return ChangeKind.UNCHANGED.value, f"already built; not deployed (active: {active})"


def run_doc(result: RunResult) -> dict[str, Any]:
    return {
        "schema": "tidegate.run-result/v1",
        "run_id": result.run_id,
        "status": result.status.value,
        "reason": result.reason,
        "published": sum(1 for o in result.outcomes if o.state.value == "published"),
        "partitions": [
            {
                "model": o.model,
                "partition": o.label,
                "attempt_id": o.attempt_id,
                "state": o.state.value,
                "rows": o.rows,
                "checksum": o.checksum,
                "reason": o.reason,
            }
            for o in result.outcomes
        ],
        "recovered": {
            "published": list(result.reconciliation.published),
            "failed": list(result.reconciliation.failed),
            "runs_interrupted": list(result.reconciliation.runs_interrupted),
        },
        "notes": list(result.notes),
    }


def run(result: RunResult) -> None:
    rec = result.reconciliation
    if rec.changed_anything:
        console.print(
            f"recovered from an earlier crash: {len(rec.published)} attempt(s) confirmed "
            f"published from warehouse markers, {len(rec.failed)} marked failed"
        )
    for note in result.notes:
        console.print(note)
    shown = (
        result.outcomes
        if len(result.outcomes) <= 40
        else [o for o in result.outcomes if o.state.value != "published"]
    )
    if shown:
        table = Table("model", "partition", "state", "rows", "checksum", "reason")
        for o in shown:
            table.add_row(
                o.model, o.label, o.state.value, str(o.rows or ""), o.checksum or "", o.reason or ""
            )
        console.print(table)
    published = sum(1 for o in result.outcomes if o.state.value == "published")
    console.print(
        f"{result.run_id}: {result.status.value}, "
        f"{published} of {len(result.outcomes)} partition(s) published"
    )


def status(document: dict[str, Any]) -> None:
    table = Table(
        "model",
        "grain",
        "active",
        "published",
        "stale",
        "failed",
        "running",
        "not right",
        "last run",
    )
    for m in document["models"]:
        counts = m["partitions"]
        last = m["last_run"]
        table.add_row(
            m["model"]
            + (" (paused)" if m["paused"] else "")
            + (" (not deterministic)" if m["nondeterministic"] else ""),
            m["grain"],
            _active(m),
            str(counts["published"]),
            str(counts["stale"]),
            str(counts["failed"]),
            str(counts["running"]),
            _not_right(counts),
            f"{last['run_id']} {last['status']}" if last else "-",
        )
    console.print(table)
    for m in document["models"]:
        line = _stream_line(m["model"], m["stream"]) if m.get("stream") else _deploy_line(m)
        if line:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        if m.get("cursor"):
            console.print(_cursor_line(m["model"], m["cursor"]), markup=False, highlight=False)
        for segment in m.get("ranges", []):
            console.print(
                f"  {segment['range']}: {segment['state']} "
                f"({segment['count']}) by {segment['version'] or '-'}"
            )


# status's counts of marked partitions, as the table shows them
MARKED = (
    ("tainted", "tainted"),
    ("upstream_changed", "upstream changed"),
    ("diverged", "diverged"),
    ("missing", "missing"),
)


def _not_right(counts: dict[str, int]) -> str:
    """Published partitions that must not be read as green, by why."""
    found = [f"{counts[key]} {label}" for key, label in MARKED if counts.get(key)]
    return ", ".join(found) or "-"


def _stream_line(model: str, stream: dict[str, Any]) -> str:
    """What a stream model's job does, from where, and whether anything supervises it."""
    state, seq = stream["state"], stream["version_seq"]
    line = f"{model}: stream {state}, v{seq}"
    if stream["previous_version_id"] and state in ("starting", "handover"):
        line += f" taking over from {stream['previous_version_id']}"
    line += f", started from {stream['restore_point'] or 'nothing'}"
    if stream["checkpoint"]:
        line += f"; newest checkpoint {stream['checkpoint']} ({stream['checkpoints']} since start)"
    if stream["savepoint"]:
        line += f"; newest savepoint {stream['savepoint']}"
    if stream["supervised"]:
        where = f" at {stream['address']}" if stream["address"] and state == "running" else ""
        return f"{line}; supervised by pid {stream['supervisor_pid']}{where}"
    if state == "stopped":
        return f"{line}; not supervised (`tidegate stream start {model}` resumes it)"
    return (
        f"{line}; its supervisor (pid {stream['supervisor_pid']}) is gone: "
        f"`tidegate stream start {model}` resumes from the newest restore point"
    )


def _cursor_line(model: str, cursor: dict[str, Any]) -> str:
    line = f"{model}: cursor {cursor['cursor']}, the next run processes {cursor['position']}"
    mark = cursor["last_mark"]
    if mark:
        line += f"; last run {mark['run_id']}: {_mark_text(mark)}"
    return line


def _mark_text(mark: dict[str, Any]) -> str:
    if mark["watermark"] is None:
        return f"nothing processed ({mark['rule']}: {mark['reason']})"
    return (
        f"({mark['committed']}, {mark['watermark']}] by watermark {mark['rule']}: {mark['reason']}"
    )


def _active(model: dict[str, Any]) -> str:
    active, deploy = model["active_version"], model["deploy"]
    if active is None:
        return "-"
    pending = " (pending)" if deploy and deploy["state"] == "pending" else ""
    return f"v{active['seq']} ({active['id']}){pending}"


def _deploy_line(model: dict[str, Any]) -> str | None:
    deploy, upcoming = model["deploy"], model["next_partition"]
    if deploy is None:
        return None
    if deploy["state"] == "confirmed":
        line = (
            f"{model['model']}: running {deploy['version']} since run {deploy['confirmed_by_run']}"
        )
        checked = deploy["correctness"]
        if checked:
            verdict = {True: "the same", False: "different", None: "not compared"}[checked["agree"]]
            line += f" (first partition {checked['partition']} vs {checked['against']}: {verdict})"
    else:
        line = f"{model['model']}: {deploy['version']} deployed, pending its first run"
    if upcoming:
        from tidegate.ops.schedule import tick_text

        window, gap = tick_text(model["model"], upcoming)
        line += f"; next due {window} with {upcoming['version']}"
        line += f"\n  {gap}" if gap else ""
    return line


MARK_HEADINGS = {"taint": "TAINTED", "stale": "STALE", "diverged": "DIVERGED", "missing": "MISSING"}


def partition(document: dict[str, Any]) -> None:
    console.print(f"{document['model']} {document['partition']}: {document['state']}")
    for taint in document["taints"]:
        via = f", via {taint['via']}" if taint["via"] else ""
        # a taint is recovered from where it was declared; any other mark where it is
        fix = (
            f"tidegate recover {taint['origin']}"
            if taint["kind"] == "taint"
            else f"tidegate recover {document['model']} --partitions {document['partition']}"
        )
        console.print(
            f"  {MARK_HEADINGS[taint['kind']]:<12} {taint['reason']} ({taint['taint_id']} on "
            f"{taint['origin']}{via}); `{fix}` recomputes it",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    published = document["published"]
    if published:
        v = published["version"]
        commit = v["git_commit"] or "no git commit"
        dirty = " (dirty tree)" if v["git_dirty"] else ""
        console.print(
            f"  written by   v{v['seq']} ({v['id']}), fingerprint {v['fingerprint'][:16]}"
        )
        console.print(f"  commit       {commit}{dirty}")
        if "dbt" in v:
            dbt = v["dbt"]
            console.print(
                f"  dbt node     {dbt['node']} (dbt {dbt['dbt_version']}, {dbt['adapter']})"
            )
        console.print(f"  run          {published['run_id']}  attempt {published['attempt_id']}")
        console.print(f"  published at {published['published_at']}")
        console.print(f"  rows         {published['rows']}  checksum {published['checksum']}")
        if "iceberg" in published:
            held = published["iceberg"]
            console.print(
                "  iceberg      "
                + (
                    f"{held['table']} snapshot {held['snapshot_id']} ({held['committed_at']})"
                    if held
                    else "no snapshot of main holds this attempt"
                )
            )
        for check in published["checks"]:
            mark = (
                "pass"
                if check["passed"]
                else ("FAIL" if check["severity"] == "blocking" else "warn")
            )
            console.print(f"  check {check['name']}: {mark} ({check['message']})")
        for item in published["reconciliations"]:
            verdict = "ok" if item["passed"] else "MISMATCH"
            console.print(
                f"  reconcile {item['name']}: source {item['source_value']} = "
                f"target {item['target_value']} ({verdict})"
            )
        for read in published["inputs"]:
            console.print(
                f"  read {read['kind']} {read['upstream']} {read['range']}"
                + (f" fingerprint {read['fingerprint']}" if read["fingerprint"] else "")
            )
    last = document["last_attempt"]
    if last and (not published or last["attempt_id"] != published["attempt_id"]):
        console.print(f"  last attempt {last['attempt_id']} {last['state']}: {last['error'] or ''}")


def _plan_lines(plan: dict[str, Any]) -> list[str]:
    """The plan recorded with a run: a backfill's, a recovery's steps, or a rerun's judgment."""
    if "judgment" in plan:
        approval = plan["approval"]
        of = plan["rerun_of"] or f"{plan['model']} partitions"
        lines = [f"rerun of {of} with v{plan['seq']} ({plan['version_id']})"]
        lines += [f"{j['partition']}: {j['verdict']} — {j['reason']}" for j in plan["judgment"]]
        if approval:
            lines.append(f"approved by {approval['by']} at {approval['at']}: {approval['reason']}")
        return lines
    if "steps" in plan:
        lines = [f"recover {plan['model']} {plan['requested']} ({', '.join(plan['taint_ids'])})"]
        return lines + [line for step in plan["steps"] for line in _plan_lines(step)]
    return [
        f"{plan['model']}: version {plan['version_id']}, batches of {plan['batch_size']}, "
        f"{plan['max_concurrency']} in flight, rate {plan['rate_per_minute'] or 'unlimited'}"
    ]


def run_detail(document: dict[str, Any]) -> None:
    console.print(
        f"{document['run_id']} ({document['kind']}) {document['status']} "
        f"by {document['requester']}, {document['started_at']} → {document['ended_at']}"
    )
    if document["reason"]:
        console.print(f"  reason: {document['reason']}")
    if document["trigger"]:
        console.print(f"  stop-loss: {document['trigger']}")
    plan = document["plan"]
    for line in _plan_lines(plan) if plan else []:
        console.print(f"  {line}")
    if document["plan_hash"]:
        console.print(f"  plan file sha256 {document['plan_hash'][:12]}")
    for change in document["throttle"]:
        console.print(f"  throttle at {change['at']}: {change['reason']}", markup=False)
    for mark in document.get("cursor", []):
        text = f"  cursor {mark['model']} ({mark['cursor']}): {_mark_text(mark)}"
        if mark["open_transactions"]:
            text += f" [max {mark['candidate']} read while open: {mark['open_transactions']}]"
        console.print(text, markup=False, highlight=False)
    table = Table(
        "model", "partition", "batch", "state", "rows", "checksum", "reconciled", "error", "taint"
    )
    for a in document["attempts"]:
        reconciled = a["reconciliations"]
        table.add_row(
            a["model"],
            a["partition"],
            "" if a["batch"] is None else str(a["batch"]),
            a["state"],
            str(a["rows"] or ""),
            a["checksum"] or "",
            ("ok" if all(r["passed"] for r in reconciled) else "MISMATCH") if reconciled else "",
            a["error"] or "",
            a["taint"] or "",
        )
    console.print(table)
    for line in _command_lines(document["attempts"]):
        console.print(line, markup=False, highlight=False)


def _command_lines(attempts: list[dict[str, Any]]) -> list[str]:
    """The jobs command models ran, once per job (the attempts of a unit share one)."""
    lines: list[str] = []
    shown: set[tuple[str, str]] = set()
    for a in attempts:
        job = a["command"]
        if job is None or (job["started_at"], a["model"]) in shown:
            continue
        shown.add((job["started_at"], a["model"]))
        if job["exit_code"] is not None:
            ended = f"exit {job['exit_code']} after {job['duration_ms'] / 1000:.1f} s"
        elif job["ended_at"] is None:
            ended = "running (or tidegate was killed; its next writer stops the job)"
        else:
            ended = f"stopped at {job['ended_at']} (tidegate was killed while it ran)"
        lines.append(f"{a['model']} {a['partition']}: job pid {job['pid']}, {ended}")
        lines.append(f"  command: {shlex.join(job['command'])}")
        env = " ".join(f"{k}={v}" for k, v in job["environment"].items())
        lines.append(f"  environment: {env}")
        for text in (job["stderr_tail"] or "").strip().splitlines()[-5:]:
            lines.append(f"  stderr: {text}")
    return lines


def history(document: dict[str, Any], seqs: Mapping[str, int]) -> None:
    """`seqs`: each version id's vN, which people name versions by; the id stays beside it
    because `deploy --version` and the JSON use it too."""
    table = Table("at", "event", "version", "by", "reason")
    for e in document["events"]:
        version = _version_ref(e["version_id"], seqs)
        table.add_row(e["at"], e["kind"], version, e["actor"], e["reason"] or "")
    console.print(table)


def _version_ref(version_id: str | None, seqs: Mapping[str, int]) -> str:
    if version_id is None:
        return ""
    seq = seqs.get(version_id)
    return f"v{seq} ({version_id})" if seq is not None else version_id


def gate_doc(gate: Gate) -> dict[str, Any]:
    return {
        "schema": "tidegate.gate/v1",
        "gate_id": gate.gate_id,
        "model": gate.model,
        "version_id": gate.version_id,
        "seq": gate.report["seq"],
        "passed": gate.passed,
        "flaky": gate.flaky,
        "created_at": gate.created_at,
        "actor": gate.actor,
        "inputs": gate.inputs,
        "shadow_table": gate.report["shadow_table"],
        "summary": gate.report["summary"],
        "partitions": gate.report["partitions"],
        "diff": gate.report["diff"],
    }


def gate(document: dict[str, Any]) -> None:
    verdict = "passed" if document["passed"] else "FAILED"
    flaky = " (flaky: an earlier gate on the same inputs disagreed)" if document["flaky"] else ""
    console.print(
        f"{document['model']} v{document['seq']}: gate {document['gate_id']} {verdict}{flaky} "
        f"— {document['summary']}; output in {document['shadow_table']}"
    )
    compared = document["diff"]
    against = {d["partition"]: d for d in compared["partitions"]} if compared else {}
    table = Table("partition", "state", "rows", "checksum", "failed checks / reason")
    if compared:
        table.add_column(f"vs {compared['against']}")
    for p in document["partitions"]:
        failing = [f"{c['name']}: {c['message']}" for c in p["checks"] if not c["passed"]]
        failing += [
            f"reconciliation {r['name']}: {r['source_value']} vs {r['target_value']}"
            for r in p["reconciliations"]
            if not r["passed"]
        ]
        row = [
            p["partition"],
            p["state"],
            "" if p["rows"] is None else str(p["rows"]),
            p["checksum"] or "",
            "; ".join(failing) or p["reason"] or "",
        ]
        if compared:
            row.append(_compared(against.get(p["partition"])))
        table.add_row(*row)
    console.print(table)
    if compared and (compared["columns"]["only_left"] or compared["columns"]["only_right"]):
        console.print(
            f"columns only in {compared['against']}: "
            f"{', '.join(compared['columns']['only_left']) or '-'}; only in "
            f"v{document['seq']}: {', '.join(compared['columns']['only_right']) or '-'}"
        )


def _compared(found: dict[str, Any] | None) -> str:
    if found is None:
        return ""
    if found["agree"] is None:
        return str(found["note"])
    if found["agree"]:
        return "same"
    s = found["summary"]
    keys = [
        f"{s[k]} {k.removeprefix('keys_').replace('_', ' ')}"
        for k in ("keys_only_left", "keys_only_right", "keys_changed")
        if s.get(k)
    ]
    return "differs" + (f": {', '.join(keys)} key(s)" if keys else "")


def verify(document: dict[str, Any]) -> None:
    rebuilt = document["rebuilt"]
    if rebuilt is not None:
        _rebuilt(rebuilt)
        return
    for model in document["models"]:
        sums = model["checksums"]
        compared = {
            "off": "not compared (--checksums)",
            "all": f"all {sums['compared']} compared",
            "sample": f"a sample of {sums['compared']} compared",
        }.get(sums["how"], f"not compared: {sums['note']}")
        console.print(
            f"{model['model']}: {model['published']} published partition(s), "
            f"{model['markers']} commit marker(s); checksums {compared}"
        )
    if document["findings"]:
        table = Table("model", "diverged", "partitions", "count", "ledger", "warehouse")
        for group in _runs_of(document["findings"]):
            first, last = group[0], group[-1]
            alone = len(group) == 1
            table.add_row(
                first["model"],
                first["kind"],
                first["partition"] if alone else f"{first['partition']}..{last['partition']}",
                str(len(group)),
                (first["attempt_id"] or "-") if alone else "…",
                (first["found"] or "-") if alone else "…",
            )
        console.print(table)
    for repaired in document["repaired"]:
        console.print(
            f"marked {repaired['marked']} partition(s) of {repaired['model']} {repaired['kind']}"
            + (f" ({repaired['taint_id']})" if repaired["taint_id"] else "")
            + (f"; {repaired['already_marked']} were already" if repaired["already_marked"] else "")
        )
    if not document["findings"]:
        console.print("clean: the warehouse holds what the ledger records")
    elif not document["repaired"]:
        console.print(
            "`tidegate verify --repair` marks them; `tidegate backfill MODEL --partitions R "
            "--stale-only` then republishes them"
        )
    else:
        console.print("republish them with `tidegate backfill MODEL --partitions R --stale-only`")
    for model, kinds in (document.get("marked") or {}).items():
        shown = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
        console.print(
            f"{model}: the ledger marks {shown} partition(s) not right; "
            f"`tidegate recover {model}` recomputes them"
        )


def _runs_of(findings: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Findings in runs of one model and kind, in the order found (partition order)."""
    groups: list[list[dict[str, Any]]] = []
    for finding in findings:
        last = groups[-1][-1] if groups else None
        same = last is not None and last["model"] == finding["model"]
        if same and last is not None and last["kind"] == finding["kind"]:
            groups[-1].append(finding)
        else:
            groups.append([finding])
    return groups


def _rebuilt(rebuilt: dict[str, Any]) -> None:
    console.print(
        f"ledger of {rebuilt['project']} rebuilt from {rebuilt['markers']} commit marker(s): "
        f"{rebuilt['runs']} run(s), marked as rebuilt"
    )
    if rebuilt["versions_matched"]:
        console.print(f"versions the code still produces: {', '.join(rebuilt['versions_matched'])}")
    if rebuilt["versions_lost"]:
        console.print(
            f"versions whose definition is lost (placeholders, never run): "
            f"{', '.join(rebuilt['versions_lost'])}; `tidegate backfill MODEL --partitions R "
            "--stale-only` recomputes their partitions"
        )
    for model, version in rebuilt["activated"].items():
        console.print(f"{model}: {version} active again (the version of its newest marker)")
