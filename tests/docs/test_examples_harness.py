"""The docs-examples harness itself: what counts as an example, and how exit codes are held."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.docs.examples import Block, read_page, script

pytestmark = pytest.mark.docs


def run(text: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "DOCS_EXAMPLE_CWD": str(cwd / "cwd")}
    return subprocess.run(
        ["bash", "-c", script(Block(1, text))],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_only_blocks_with_a_tidegate_line_that_are_not_marked_are_examples(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- examples: demo -->\n"
        "```bash\npip install tidegate\n```\n"
        "```bash\ntidegate status\n```\n"
        "```toml\ntidegate = 1\n```\n"
        "```bash\n# not run: a remote master\ntidegate run\n```\n"
        "!!! note\n    ```sh\n    cd x\n    tidegate build\n    ```\n"
    )
    read = read_page(page)
    assert read.setup == "demo"
    assert [block.text for block in read.blocks] == ["tidegate status", "cd x\ntidegate build"]


def test_a_line_must_exit_as_its_comment_says(tmp_path: Path) -> None:
    assert run("false # exits 1\ntrue", tmp_path).returncode == 0
    failed = run("(exit 3) # exits 2", tmp_path)
    assert failed.returncode == 98 and "exited 3, not 2" in failed.stderr
    assert run("true # exits 2", tmp_path).returncode == 97


def test_the_block_stops_at_the_first_unexpected_failure(tmp_path: Path) -> None:
    done = run("echo one\nfalse\necho two", tmp_path)
    assert done.returncode != 0 and done.stdout == "one\n"


def test_a_continued_command_carries_its_expected_exit_and_heredocs_are_left_alone(
    tmp_path: Path,
) -> None:
    done = run(
        "sh -c \\\n  'exit 4' # exits 4\ncat > f.txt <<'EOF'\nline # exits 9\nEOF\ncat f.txt",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "line # exits 9\n"


def test_a_block_leaves_the_folder_it_ended_in(tmp_path: Path) -> None:
    (tmp_path / "shop").mkdir()
    assert run("cd shop", tmp_path).returncode == 0
    assert (tmp_path / "cwd").read_text().strip() == str(tmp_path / "shop")
