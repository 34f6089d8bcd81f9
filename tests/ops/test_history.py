"""`history`: versions as people name them, events in the order the ledger recorded them, and
the recoveries and taint reach that changed a model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.kit import tidegate


def cli(project: Path, *args: str, code: int = 0) -> Any:
    result = tidegate(*args, "--project", project)
    assert result.exit_code == code, (args, result.stdout[-1500:], result.stderr)
    return result


def events(project: Path, model: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cli(project, "history", model, "--json").json()["events"]
    return found


def test_human_history_names_each_version_vn_with_its_id(project: Path) -> None:
    [deploy] = [e for e in events(project, "daily_revenue") if e["kind"] == "deploy"]
    shown = cli(project, "history", "daily_revenue")
    assert f"v1 ({deploy['version_id']})" in shown.stdout
