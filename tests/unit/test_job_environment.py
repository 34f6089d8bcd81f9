"""What a command or dbt model's job runs with: a few variables of tidegate's environment, what
the model declares or passes through, tidegate's own for the partition — never a variable that
holds one of tidegate's secrets."""

from __future__ import annotations

import pytest

from tidegate.domain.command import job_environment, job_secrets, secret_uses

TIDEGATE = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/etl",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "LC_TIME": "en_GB.UTF-8",
    "TZ": "UTC",
    "TMPDIR": "/tmp/etl",
    "STATE_PW": "state-password",
    "HOOK_TOK": "hook-token",
    "PGPASSWORD": "pg-password",
    "AWS_PROFILE": "etl",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "REGION": "eu",
    "TIDEGATE_DBT_VENV": "/opt/dbt",
    "PYTHONPATH": "/src",
}
SECRETS = {
    "STATE_PW": "the [state] password_env",
    "HOOK_TOK": "the token_env of [[notify]] hook",
    "PGPASSWORD": "libpq's password variable",
}
OWN = {"TIDEGATE_START": "2025-01-01T00:00:00+00:00", "TIDEGATE_MODEL": "revenue"}


BASE = ("PATH", "HOME", "LANG", "LC_ALL", "LC_TIME", "TZ", "TMPDIR")


def test_a_job_gets_the_base_variables_and_tidegates_own_only() -> None:
    assert job_environment(TIDEGATE, (), (), OWN, SECRETS) == {
        **{name: TIDEGATE[name] for name in BASE},
        **OWN,
    }


def test_declared_and_passed_through_variables_are_added() -> None:
    environment = job_environment(
        TIDEGATE,
        (("CURRENCY", "EUR"), ("TARGET", "${REGION}-1")),
        ("AWS_PROFILE", "AWS_SECRET_ACCESS_KEY", "NOT_SET_ANYWHERE"),
        OWN,
        SECRETS,
    )
    assert environment["CURRENCY"] == "EUR"
    assert environment["TARGET"] == "eu-1"
    assert environment["AWS_PROFILE"] == "etl"
    assert environment["AWS_SECRET_ACCESS_KEY"] == "aws-secret"
    assert "NOT_SET_ANYWHERE" not in environment  # passed through when set, not invented
    assert "REGION" not in environment and "PYTHONPATH" not in environment


def test_tidegates_own_variables_win_over_what_the_model_declares() -> None:
    environment = job_environment(
        TIDEGATE, (("TIDEGATE_START", "x"), ("PATH", "/opt/job/bin")), (), OWN, SECRETS
    )
    assert environment["TIDEGATE_START"] == OWN["TIDEGATE_START"]
    assert environment["PATH"] == "/opt/job/bin"  # a job may set its own PATH


def test_a_base_variable_named_as_a_secret_is_left_out() -> None:
    # whatever a project calls its password variable, a job never gets it
    environment = job_environment(TIDEGATE, (), (), OWN, {**SECRETS, "TZ": "odd but possible"})
    assert "TZ" not in environment


def test_a_missing_reference_names_the_variable() -> None:
    with pytest.raises(KeyError, match="UNSET"):
        job_environment(TIDEGATE, (("X", "${UNSET}"),), (), OWN, SECRETS)


def test_a_model_naming_a_secret_variable_is_told_which_and_why() -> None:
    uses = secret_uses(
        (("PGPASSWORD", "x"), ("DB_URL", "postgresql://etl:${STATE_PW}@db/x"), ("OK", "${REGION}")),
        ("AWS_PROFILE", "HOOK_TOK"),
        SECRETS,
    )
    assert [(u.key, u.variable) for u in uses] == [
        ("env.PGPASSWORD", "PGPASSWORD"),
        ("env.DB_URL", "STATE_PW"),
        ("env_passthrough", "HOOK_TOK"),
    ]
    assert [u.message() for u in uses] == [
        "env.PGPASSWORD: PGPASSWORD is libpq's password variable: tidegate never gives its "
        "secrets to a job",
        "env.DB_URL: ${STATE_PW} is the [state] password_env: tidegate never gives its secrets "
        "to a job",
        "env_passthrough: HOOK_TOK is the token_env of [[notify]] hook: tidegate never gives its "
        "secrets to a job",
    ]
    assert secret_uses((("OK", "${REGION}"),), ("AWS_PROFILE",), SECRETS) == []


def test_the_values_a_job_holds_as_secrets() -> None:
    # declared by a secret-looking name or from a ${reference} (what the record masks), passed
    # through under a secret-looking name
    found = job_secrets(
        (("API_TOKEN", "plain-token"), ("UPSTREAM", "${REGION}-db"), ("CURRENCY", "EUR")),
        ("AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "UNSET_KEY"),
        TIDEGATE,
    )
    assert sorted(found) == ["aws-secret", "eu-db", "plain-token"]
    # a reference that is not set holds nothing (the job fails on it before it runs)
    assert job_secrets((("X_TOKEN", "${UNSET}"),), (), TIDEGATE) == []
