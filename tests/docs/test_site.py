"""The docs site builds strictly (a broken link, a missing page or an unknown reference marker
fails), and its generated reference names every command, exit code and JSON schema of the code."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import click
import pytest

from tidegate.cli import cli, subcommands
from tidegate.domain import errors

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.docs


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    return out


def text_of(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


def commands(group: click.Group, prefix: str) -> list[str]:
    found = []
    for name, command in subcommands(group).items():
        if command.hidden:
            continue
        found.append(f"{prefix} {name}")
        if isinstance(command, click.Group):
            found += commands(command, f"{prefix} {name}")
    return found


def test_the_cli_reference_names_every_command(site: Path) -> None:
    page = text_of(site / "reference" / "cli" / "index.html")
    missing = [name for name in commands(cli, "tidegate") if name not in page]
    assert not missing, missing


def test_the_exit_code_reference_holds_every_code(site: Path) -> None:
    page = text_of(site / "reference" / "exit-codes" / "index.html")
    for error in (errors.UsageError, errors.RefusedError, errors.BusyError, errors.StoppedError):
        assert re.search(rf"\b{error.exit_code}\s+{error.__name__}", page), error


def test_the_json_reference_holds_every_schema(site: Path) -> None:
    page = text_of(site / "reference" / "json" / "index.html")
    shipped = resources.files("tidegate") / "schemas"
    names = [entry.name.removesuffix(".json") for entry in shipped.iterdir()]
    assert names
    assert [name for name in names if name not in page] == []
