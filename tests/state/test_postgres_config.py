"""`[state] url`: what tidegate.toml may say about a PostgreSQL ledger, and what a user sees when
it is wrong — one line, exit 2, never the password. None of these needs a server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.kit import tidegate
from tidegate.domain.errors import UsageError
from tidegate.project.config import StateSection
from tidegate.state.factory import open_state

SQLITE_STATE = '[state]\npath = ".tidegate/state.db"\n'
SECRET = "hunter2-do-not-print"


def with_state(project: Path, state: str) -> Path:
    toml = project / "tidegate.toml"
    text = toml.read_text()
    assert text.count(SQLITE_STATE) == 1
    toml.write_text(text.replace(SQLITE_STATE, state))
    return project


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (
            f'[state]\nurl = "postgresql://alice:{SECRET}@db.example/ledger"\n',
            "state: url: must not hold a password; name an environment variable in password_env",
        ),
        (
            f'[state]\nurl = "postgresql://alice@db.example/ledger?password={SECRET}"\n',
            "state: url: must not hold a password",
        ),
        ('[state]\nurl = "mysql://alice@db.example/ledger"\n', "state: url: must be postgresql://"),
        (
            '[state]\npath = "x.db"\nurl = "postgresql://alice@db.example/ledger"\n',
            "path (SQLite) or url (PostgreSQL), not both",
        ),
        ('[state]\nschema = "ledger"\n', "schema is for a PostgreSQL state store"),
        (
            '[state]\nurl = "postgresql://alice@db.example/ledger"\nschema = "my-ledger"\n',
            "schema: String should match pattern",
        ),
        (
            '[state]\nurl = "postgresql://alice@db.example/ledger"\npassword_env = "A-B"\n',
            "password_env: String should match pattern",
        ),
    ],
)
def test_a_bad_state_section_is_one_line_naming_the_file(
    undeployed_project: Path, state: str, message: str
) -> None:
    project = with_state(undeployed_project, state)
    result = tidegate("status", "--project", project)
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: ") and "tidegate.toml:" in result.stderr
    assert message in result.stderr
    assert SECRET not in result.stderr + result.stdout


def test_a_missing_password_variable_is_named_and_nothing_else(undeployed_project: Path) -> None:
    project = with_state(
        undeployed_project,
        '[state]\nurl = "postgresql://alice@127.0.0.1:1/ledger"\n'
        'password_env = "TIDEGATE_NO_SUCH_VARIABLE"\n',
    )
    result = tidegate("status", "--project", project)
    assert result.exit_code == 2
    assert result.stderr == (
        "error: state.password_env: environment variable TIDEGATE_NO_SUCH_VARIABLE is not set\n"
    )


def test_a_server_that_is_down_is_one_line_exit_2(undeployed_project: Path) -> None:
    project = with_state(undeployed_project, '[state]\nurl = "postgresql://alice@127.0.0.1:1/x"\n')
    result = tidegate("history", "daily_revenue", "--project", project, "--json")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: state store postgresql://alice@127.0.0.1:1/x (schema tidegate_state): "
        "cannot connect: "
    )
    assert len(result.stderr.splitlines()) == 1
    assert '"exit_code": 2' in result.stdout


def test_without_psycopg_the_hint_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m.startswith(("tidegate.state.postgres", "psycopg"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the extra were not installed
    section = StateSection.model_validate({"url": "postgresql://alice@db.example/ledger"})
    with pytest.raises(UsageError) as raised:
        open_state(tmp_path, section)
    assert str(raised.value) == (
        "[state] url needs PostgreSQL support: pip install 'tidegate[postgres]'"
    )


def test_the_default_is_the_sqlite_file(tmp_path: Path) -> None:
    section = StateSection()
    assert (section.url, section.path, section.db_schema) == (
        None,
        ".tidegate/state.db",
        "tidegate_state",
    )
    store = open_state(tmp_path, section)
    try:
        assert (tmp_path / ".tidegate" / "state.db").exists()
    finally:
        store.close()
