"""Text from users, jobs and the ledger reaches a terminal shown, never obeyed: a reason, an
approval, a job's stderr or a name holding escape sequences, C1 controls or bidi overrides is
printed with them escaped (`\\x1b`, `\\u202e`) by every human output, on stdout and on stderr;
--json carries the exact text, as JSON escapes."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.kit import Result, example_project, tidegate
from tests.programs.kit import add_command_model, deploy

DAY = "2025-03-05"
# clears the screen, retitles the window, reverses what follows, a C1 CSI, DEL, a carriage
# return that would overwrite the line, and a line break
HOSTILE = "ok\x1b[2J\x1b]0;pwned\x07 \u202etxt.exe\u202c \x9b31m\x7f\rover\nnext"
# what the job's last line on stderr shows once escaped
JOB_LINE = "job died\x1b]0;pwned\x07 \u2066\u202eevil\u2069 \x1b[31m"
JOB = f"sys.stderr.write({JOB_LINE + chr(10)!r})\nsys.exit(1)\n"
OBEYED = {
    *map(chr, range(0x20)),
    "\x7f",
    *map(chr, range(0x80, 0xA0)),
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
} - {"\n"}
SHOWN = "\\x1b]0;pwned\\x07"  # the window-title sequence, as text


@dataclass
class Planted:
    project: Path
    failed_run: str
    rerun: str
    printed: dict[str, Result] = field(default_factory=dict)


def ok(result: Result, code: int = 0) -> Result:
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def last_run(project: Path, model: str) -> str:
    shown = ok(tidegate("status", model, "--json", "--project", project)).json()
    return str(shown["models"][0]["last_run"]["run_id"])


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Planted]:
    """A command model whose newer job writes escapes to stderr and fails, deployed with a
    hostile --reason; daily_revenue tainted and paused with it; the failed run rerun with it as
    the approval. What each command printed for a person is kept."""
    project = example_project(tmp_path_factory.mktemp("escapes") / "shop", rows_per_day=3)
    p = ("--project", project)
    add_command_model(project, "revenue_job", "compute()\n")
    deploy(project, "revenue_job")
    ok(tidegate("run", "revenue_job", "--partition", DAY, *p))
    published_by = last_run(project, "revenue_job")
    add_command_model(project, "revenue_job", JOB)
    ok(tidegate("build", *p))
    printed = {
        "deploy": ok(tidegate("deploy", "revenue_job", "--force", "--reason", HOSTILE, *p)),
        "run": ok(tidegate("run", "revenue_job", "--partition", DAY, *p), code=1),
    }
    failed_run = last_run(project, "revenue_job")
    ok(tidegate("run", "daily_revenue", "--partition", DAY, *p))
    printed["taint"] = ok(
        tidegate("taint", "daily_revenue", "--partitions", DAY, "--reason", HOSTILE, *p)
    )
    printed["pause"] = ok(tidegate("pause", "daily_revenue", "--reason", HOSTILE, *p))
    # another version over a published partition needs an approval: the job fails again
    printed["rerun"] = ok(
        tidegate("rerun", published_by, "--partitions", DAY, "--approve", HOSTILE, *p), code=1
    )
    rerun = last_run(project, "revenue_job")
    yield Planted(project, failed_run, rerun, printed)


def read(planted: Planted, *args: str) -> Result:
    return tidegate(*args, "--project", planted.project)


READERS: dict[str, tuple[str, ...]] = {
    "history revenue_job": ("history", "revenue_job"),
    "history daily_revenue": ("history", "daily_revenue"),
    "show partition revenue_job": ("show", "partition", "revenue_job", DAY),
    "show partition daily_revenue": ("show", "partition", "daily_revenue", DAY),
    "status": ("status",),
}


def assert_shown_not_obeyed(result: Result) -> None:
    for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        obeyed = sorted({repr(c) for c in text} & {repr(c) for c in OBEYED})
        assert not obeyed, f"{stream} holds {', '.join(obeyed)}:\n{text}"
    assert "internal error" not in result.stderr


def flattened(text: str) -> str:
    """The text of a table's cells without its layout (a long cell wraps)."""
    return " ".join(part.strip() for line in text.splitlines() for part in line.split("│"))


@pytest.mark.parametrize("name", ["deploy", "run", "taint", "pause", "rerun"])
def test_the_commands_that_take_the_text_print_it_escaped(planted: Planted, name: str) -> None:
    assert_shown_not_obeyed(planted.printed[name])


def test_a_failed_run_shows_the_jobs_stderr_escaped_in_one_error_line(planted: Planted) -> None:
    run = planted.printed["run"]
    assert SHOWN in flattened(run.stdout)
    [error] = run.stderr.splitlines()
    assert error.startswith(f"error: run {planted.failed_run} failed")


@pytest.mark.parametrize("name", READERS)
def test_the_readers_print_it_escaped(planted: Planted, name: str) -> None:
    result = read(planted, *READERS[name])
    assert result.exit_code == 0, result.stderr
    assert_shown_not_obeyed(result)


def test_history_shows_a_reason_in_one_line_of_its_cell(planted: Planted) -> None:
    shown = flattened(read(planted, "history", "daily_revenue").stdout)
    # a cell wraps at spaces: each word is whole, and the line break is one of them, escaped
    escaped = "ok\\x1b[2J\\x1b]0;pwned\\x07 \\u202etxt.exe\\u202c \\x9b31m\\x7f\\rover\\nnext"
    for word in escaped.split(" "):
        assert word in shown, word


@pytest.mark.parametrize("run", ["failed_run", "rerun"])
def test_show_run_prints_errors_stderr_and_approval_escaped(planted: Planted, run: str) -> None:
    result = read(planted, "show", "run", getattr(planted, run))
    assert result.exit_code == 0, result.stderr
    assert_shown_not_obeyed(result)
    assert "stderr: job died\\x1b]0;pwned\\x07 \\u2066\\u202eevil\\u2069 \\x1b[31m" in result.stdout
    if run == "rerun":
        assert "\\u202etxt.exe\\u202c" in result.stdout  # the approval's reason


def test_an_error_line_naming_hostile_text_is_escaped(planted: Planted) -> None:
    result = read(planted, "show", "partition", HOSTILE, DAY)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert_shown_not_obeyed(result)
    as_json = read(planted, "show", "partition", HOSTILE, DAY, "--json")
    assert_shown_not_obeyed(as_json)


def test_json_carries_the_exact_text(planted: Planted) -> None:
    def document(*args: str) -> Any:
        result = read(planted, *args, "--json")
        assert result.exit_code == 0, result.stderr
        assert not set(result.stdout) & OBEYED  # as JSON escapes
        return result.json()

    reasons = [e["reason"] for e in document("history", "daily_revenue")["events"]]
    assert HOSTILE in reasons
    assert HOSTILE in [e["reason"] for e in document("history", "revenue_job")["events"]]
    [taint] = document("show", "partition", "daily_revenue", DAY)["taints"]
    assert taint["reason"] == HOSTILE
    failed = document("show", "run", planted.failed_run)
    [attempt] = failed["attempts"]
    assert attempt["command"]["stderr_tail"] == JOB_LINE + "\n"
    assert attempt["error"].endswith(f"({JOB_LINE})")
    rerun = document("show", "run", planted.rerun)
    assert rerun["plan"]["approval"]["reason"] == HOSTILE


SRC = Path(__file__).resolve().parents[2] / "src" / "tidegate"
# where text meets the terminal: tidegate.terminal.echo, and the console and table of render
CHOKE_POINTS = {SRC / "terminal.py", SRC / "render.py"}
# the examples `tidegate init --example` scaffolds: the user's own scripts, which tidegate never
# runs (a Flink job's helper that writes input files prints what it wrote)
USER_SCRIPTS = SRC / "examples"


def _json_echo(node: ast.AST) -> bool:
    """`click.echo(json.dumps(...))`: a JSON document (ensure_ascii) has nothing to escape."""
    return (
        isinstance(node, ast.Call)
        and bool(node.args)
        and isinstance(node.args[0], ast.Call)
        and isinstance(node.args[0].func, ast.Attribute)
        and node.args[0].func.attr == "dumps"
        and not any(k.arg == "ensure_ascii" for k in node.args[0].keywords)
    )


def writes_past_the_choke_points(path: Path) -> list[str]:
    """Where `path` writes to stdout or stderr, or makes a rich console or table, other than
    through tidegate.terminal.echo and tidegate.render's console and Table."""
    tree = ast.parse(path.read_text(), str(path))
    json_echoes = {
        id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call) and _json_echo(node)
    }
    from_rich = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "rich"
        for a in node.names
    }
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(SRC)}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            name = f"{node.value.id}.{node.attr}"
            if name in ("click.echo", "click.secho") and id(node) not in json_echoes:
                found.append(f"{where}: {name}")
        if isinstance(node, ast.Attribute) and ast.unparse(node) in (
            "sys.stdout.write",
            "sys.stderr.write",
        ):
            found.append(f"{where}: {ast.unparse(node)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called, keywords = node.func.id, {k.arg for k in node.keywords}
            if called == "print":
                found.append(f"{where}: print")
            if called in from_rich & {"Console", "Table"}:
                found.append(f"{where}: rich's own {called}")
            if called in from_rich & {"Progress"} and "console" not in keywords:
                found.append(f"{where}: a Progress with a console of its own")
    return found


def test_text_reaches_the_terminal_only_through_the_choke_points() -> None:
    found = [
        where
        for path in sorted(SRC.rglob("*.py"))
        if path not in CHOKE_POINTS and USER_SCRIPTS not in path.parents
        for where in writes_past_the_choke_points(path)
    ]
    assert found == [], "\n".join(found)
