"""A tool's virtual environment: used as it is when it holds what was asked for, or when the user
named one made elsewhere that holds the tool; otherwise installed, and a failed install is one
line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidegate.domain.errors import ModelError
from tidegate.execution.tool_venv import STAMP, tool_executable


def test_an_environment_made_elsewhere_that_holds_the_tool_is_used_as_it_is(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "theirs"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "dbt").write_text("#!/bin/sh\n")
    assert tool_executable(venv, ["dbt-core>=1.8"], "dbt", named=True) == venv / "bin" / "dbt"
    # nothing was installed into it, not even a stamp
    assert sorted(p.name for p in venv.iterdir()) == ["bin"]


def test_an_environment_of_ours_without_a_stamp_is_installed_into(tmp_path: Path) -> None:
    venv = tmp_path / "ours"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "dbt").write_text("#!/bin/sh\n")
    with pytest.raises(ModelError, match="installing dbt into"):
        tool_executable(venv, ["not a requirement ="], "dbt", timeout=300)
    assert (venv / "bin" / "python").exists()


def test_an_environment_holding_the_same_requirements_is_not_installed_again(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "ours"
    venv.mkdir()
    (venv / STAMP).write_text(json.dumps(["dagster==1.13.*"]))
    # the executable is not there: only the stamp says what was installed
    assert tool_executable(venv, ["dagster==1.13.*"], "dagster") == venv / "bin" / "dagster"
    assert not (venv / "bin").exists()


def test_other_requirements_are_installed_and_a_failure_is_one_line(tmp_path: Path) -> None:
    venv = tmp_path / "ours"
    venv.mkdir()
    (venv / STAMP).write_text(json.dumps(["dagster==1.12.*"]))
    with pytest.raises(ModelError) as raised:
        tool_executable(venv, ["not a requirement ="], "dagster", timeout=300)
    message = str(raised.value)
    assert message.startswith(f"installing dagster into {venv} failed: ")
    assert "\n" not in message
    # the environment was made (the install got as far as pip) and still says what it held
    assert (venv / "bin" / "python").exists()
    assert json.loads((venv / STAMP).read_text()) == ["dagster==1.12.*"]
