"""The shell examples of the docs, as the docs-examples test runs them.

A page's fenced `bash` (or `sh`) blocks that hold a line starting with `tidegate` are examples.
The page names the project they run against in a comment of its own:

    <!-- examples: orders -->   a fresh `tidegate init --example orders` project (the default)
    <!-- examples: demo -->     a project the demo has run both stories in
    <!-- examples: empty -->    an empty folder (the page makes its own project)
    <!-- examples: dbt -->      a folder holding the jaffle dbt project (tests/dbt/jaffle) as
                                `analytics/` and the DuckDB file its profile builds into, with
                                five days of raw rows; dbt installed (TIDEGATE_DBT_VENV)

The blocks of a page run in order, each as a bash script that stops at the first failing line;
a block starts in the folder where the one before it ended (a `cd` carries over, as in a reader's
shell). A line that ends in `# exits N` must exit with N instead of 0. A block whose first
line is `# not run: REASON` is shown to readers but not run (a remote Spark master, a server that
runs until stopped)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETUPS = ("orders", "demo", "empty", "dbt")
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?:bash|sh)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S
)
SETUP = re.compile(r"<!-- examples: (?P<setup>\w+) -->")
EXPECTED_EXIT = re.compile(r"\s+# exits (?P<code>\d+)\s*$")
NOT_RUN = re.compile(r"\A# not run: \S")
HEREDOC = re.compile(r"<<-?\s*['\"]?(?P<word>\w+)['\"]?")


@dataclass(frozen=True)
class Block:
    line: int
    text: str


@dataclass(frozen=True)
class Page:
    path: Path
    setup: str
    blocks: tuple[Block, ...]

    @property
    def name(self) -> str:
        return self.path.relative_to(REPO).as_posix()


def pages() -> list[Page]:
    """Every page of the docs that holds an example to run (the README's first project is run,
    and its outcome checked, by tests/e2e/test_readme_first_project.py)."""
    found = []
    for path in sorted((REPO / "docs").rglob("*.md")):
        page = read_page(path)
        if page.blocks:
            found.append(page)
    return found


def read_page(path: Path) -> Page:
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        indent = len(match.group("indent"))
        body = "\n".join(line[indent:] for line in match.group("body").splitlines())
        if NOT_RUN.match(body) or not any(
            line.startswith("tidegate ") for line in body.splitlines()
        ):
            continue
        blocks.append(Block(text.count("\n", 0, match.start()) + 1, body))
    setup = SETUP.search(text)
    return Page(path, setup.group("setup") if setup else "orders", tuple(blocks))


def script(block: Block) -> str:
    """The block as a bash script: it stops at the first line that exits other than expected."""
    lines = ["set -eu -o pipefail", """trap 'pwd > "$DOCS_EXAMPLE_CWD"' EXIT"""]
    heredoc_end: str | None = None
    for line in _logical_lines(block.text):
        if heredoc_end is not None:
            lines.append(line)
            if line.strip() == heredoc_end:
                heredoc_end = None
            continue
        opened = HEREDOC.search(line)
        if opened:
            heredoc_end = opened.group("word")
        expected = EXPECTED_EXIT.search(line)
        if expected is None:
            lines.append(line)
            continue
        command, code = line[: expected.start()], expected.group("code")
        shown = command.replace("'", "'\\''")
        lines.append(
            f"if {command}; then echo 'exited 0, not {code}: {shown}' >&2; exit 97; "
            f"else got=$?; [ $got -eq {code} ] || "
            f'{{ echo "exited $got, not {code}: {shown}" >&2; exit 98; }}; fi'
        )
    return "\n".join(lines) + "\n"


def _logical_lines(text: str) -> list[str]:
    """Lines with their backslash continuations joined, so that `# exits N` ends the command."""
    joined: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        joined.append(pending)
    return joined
