"""README's "A first project", run as written at today's date: every command succeeds, and the
scheduler tick in it confirms the deploys."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.kit import tidegate

README = Path(__file__).resolve().parents[2] / "README.md"


def first_project_commands() -> list[list[str]]:
    section = README.read_text().split("## A first project", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [shlex.split(line, comments=True) for line in block.group(1).splitlines() if line]


def test_the_first_project_works_as_written_today(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ticked = False
    for command in first_project_commands():
        if command[0] == "cd":
            monkeypatch.chdir(command[1])
            continue
        assert command[0] == "tidegate"
        arguments = command[1:]
        if arguments[0] == "init":
            # the same command at a size that keeps the test quick
            at = arguments.index("--rows-per-day")
            arguments[at + 1] = "20"
        done = tidegate(*arguments)
        assert done.exit_code == 0, (command, done.stdout, done.stderr)
        if arguments[0] == "run" and "--partition" not in arguments:
            ticked = True
            assert "published" in done.stdout, done.stdout
    assert ticked, "the first project shows a scheduler tick"
    status = tidegate("status", "--json").json()
    states = {m["model"]: m["deploy"] and m["deploy"]["state"] for m in status["models"]}
    assert states["daily_revenue"] == "confirmed"
    assert states["monthly_revenue"] == "confirmed"
