"""Declaring command models: the same validator as every model's, one line and exit 2 for a
mistake; what enters a command model's fingerprint; what its record masks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import example_project, state_dump
from tests.programs.kit import COMMAND_MODEL, add_command_model, document, run
from tidegate.domain.command import MASK, masked, resolve

COMMAND_LINE = COMMAND_MODEL.splitlines().index(
    next(line for line in COMMAND_MODEL.splitlines() if line.startswith("command = "))
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return example_project(tmp_path / "shop", rows_per_day=1)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("{start}", "{begin}"), f"{COMMAND_LINE + 1}: command: {{begin}} is not a placeholder"),
        (("{start}", "{key}"), f"{COMMAND_LINE + 1}: command: {{key}} is not a placeholder"),
        (('grain = "day"', 'grain = "week"'), "3: grain: Input should be"),
        (('sources = ["orders"]', 'sources = ["order"]'), "sources: 'order' is not a source"),
        (('sources = ["orders"]', 'upstream = ["nope"]'), "upstream: 'nope' is not a model"),
        (("timeout_seconds = 120", "timeout_seconds = 0"), "timeout_seconds: Input should be"),
        (("timeout_seconds = 120", 'packages = ["x"]'), "packages: unknown key"),
        (('REVENUE_CURRENCY = "EUR"', 'CURRENCY = "$EUR"'), "env.CURRENCY: a `$` starts"),
        (('REVENUE_CURRENCY = "EUR"', '"NOT A NAME" = "x"'), "env: 'NOT A NAME' is not a"),
        (("command = [", "commands = ["), "1: command: required key is missing"),
    ],
)
def test_a_bad_command_model_is_one_line_exit_2_and_writes_nothing(
    project: Path, change: tuple[str, str], message: str
) -> None:
    ledger = state_dump(project)
    path = add_command_model(project, "revenue_job", "compute()\n")
    path.write_text(path.read_text().replace(*change))
    result = run(project, "build", code=2)
    assert result.stderr.startswith("error: models/revenue_job.toml:"), result.stderr
    assert message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert state_dump(project) == ledger


def test_an_sql_model_does_not_declare_what_it_reads(project: Path) -> None:
    path = project / "models" / "daily_revenue.sql"
    path.write_text(path.read_text().replace('grain = "day"', 'grain = "day"\nsources = ["x"]'))
    result = run(project, "build", code=2)
    assert "models/daily_revenue.sql:3: sources: unknown key" in result.stderr


def test_two_files_for_one_model_are_refused(project: Path) -> None:
    add_command_model(project, "daily_revenue", "compute()\n")
    result = run(project, "build", code=2)
    assert "model 'daily_revenue' is declared twice" in result.stderr


def fingerprint(project: Path) -> str:
    built = document(project, "build")
    [entry] = [m for m in built["models"] if m["model"] == "revenue_job"]
    return str(entry["fingerprint"])


def test_the_fingerprint_covers_the_script_and_env_names_not_env_values(project: Path) -> None:
    add_command_model(project, "revenue_job", "compute()\n")
    first = fingerprint(project)
    add_command_model(project, "revenue_job", "compute()\n", env='REVENUE_CURRENCY = "USD"')
    assert fingerprint(project) == first
    add_command_model(project, "revenue_job", "compute()\n", env='OTHER = "EUR"')
    renamed = fingerprint(project)
    assert renamed != first
    (project / "jobs" / "revenue_job.py").write_text("compute()  # changed\n")
    assert fingerprint(project) != renamed


def test_secrets_are_masked_by_name_and_by_reference() -> None:
    declared = (
        ("API_KEY", "abc"),
        ("DB_PASSWORD", "p"),
        ("session_token", "t"),
        ("CLIENT_SECRET", "s"),
        ("URL", "https://${HOST}/x"),
        ("REGION", "eu"),
    )
    assert masked(declared) == {
        "API_KEY": MASK,
        "DB_PASSWORD": MASK,
        "session_token": MASK,
        "CLIENT_SECRET": MASK,
        "URL": MASK,
        "REGION": "eu",
    }
    assert resolve(declared, {"HOST": "example.org"})["URL"] == "https://example.org/x"
    with pytest.raises(KeyError, match="HOST"):
        resolve(declared, {})
