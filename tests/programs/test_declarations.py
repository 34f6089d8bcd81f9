"""Declaring command models: the same validator as every model's, one line and exit 2 for a
mistake; what enters a command model's fingerprint; what its record masks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import example_project, state_dump
from tests.programs.kit import COMMAND_MODEL, add_command_model, add_dbt_model, document, run
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
        (
            ("timeout_seconds = 120", 'env_passthrough = ["AWS_PROFILE", "NOT A NAME"]'),
            f"{COMMAND_LINE + 3}: env_passthrough: 'NOT A NAME' is not a variable name",
        ),
        (
            ("timeout_seconds = 120", 'env_passthrough = ["REVENUE_CURRENCY"]'),
            f"{COMMAND_LINE + 3}: env_passthrough: REVENUE_CURRENCY is declared in env too",
        ),
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


HOOK = (
    '\n[[notify]]\nname = "hook"\nkind = "http"\nurl = "https://hooks.example/x"\n'
    'token_env = "HOOK_TOKEN"\n'
)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("env", 'PGPASSWORD = "x"', "env.PGPASSWORD: PGPASSWORD is libpq's password variable"),
        (
            "env",
            'DB_URL = "https://etl:${HOOK_TOKEN}@example"',
            "env.DB_URL: ${HOOK_TOKEN} is the token_env of [[notify]] hook",
        ),
        (
            "env_passthrough",
            'env_passthrough = ["AWS_PROFILE", "HOOK_TOKEN"]',
            "env_passthrough: HOOK_TOKEN is the token_env of [[notify]] hook",
        ),
        ("env_passthrough", 'env_passthrough = ["PGPASSWORD"]', "env_passthrough: PGPASSWORD"),
    ],
)
def test_a_model_handing_a_secret_of_tidegates_to_its_job_is_refused(
    project: Path, key: str, value: str, message: str
) -> None:
    """The variables password_env and token_env name, and PGPASSWORD: one line, exit 2, the
    line of the key at fault, nothing written."""
    config = project / "tidegate.toml"
    config.write_text(config.read_text() + HOOK)
    ledger = state_dump(project)
    path = add_command_model(project, "revenue_job", "compute()\n")
    text = path.read_text()
    if key == "env":
        text = text.replace('REVENUE_CURRENCY = "EUR"', value)
    else:
        text = text.replace("timeout_seconds = 120", value)
    path.write_text(text)
    line = next(
        n for n, found in enumerate(text.splitlines(), 1) if found.startswith(value.split()[0])
    )
    result = run(project, "build", code=2)
    assert result.stderr.startswith(f"error: models/revenue_job.toml:{line}: {message}")
    assert "tidegate never gives its secrets to a job" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert state_dump(project) == ledger


def test_a_dbt_model_passing_a_secret_through_is_refused(project: Path) -> None:
    ledger = state_dump(project)
    path = add_dbt_model(project, "revenue_dbt")
    text = path.read_text().replace(
        "timeout_seconds = 600", 'timeout_seconds = 600\nenv_passthrough = ["PGPASSWORD"]'
    )
    path.write_text(text)
    line = text.splitlines().index('env_passthrough = ["PGPASSWORD"]') + 1
    result = run(project, "build", code=2)
    assert result.stderr.startswith(
        f"error: models/revenue_dbt.toml:{line}: env_passthrough: PGPASSWORD is libpq's"
    )
    assert state_dump(project) == ledger


def test_the_fingerprint_covers_passed_through_names_not_their_values(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = add_command_model(project, "revenue_job", "compute()\n")
    first = fingerprint(project)

    def pass_through(names: str) -> None:
        add_command_model(project, "revenue_job", "compute()\n")
        declared = f"timeout_seconds = 120\nenv_passthrough = {names}"
        path.write_text(path.read_text().replace("timeout_seconds = 120", declared))

    pass_through('["AWS_PROFILE"]')
    monkeypatch.setenv("AWS_PROFILE", "one")
    passing = fingerprint(project)
    assert passing != first
    monkeypatch.setenv("AWS_PROFILE", "two")
    assert fingerprint(project) == passing
    pass_through('["AWS_REGION"]')
    assert fingerprint(project) not in (first, passing)


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
