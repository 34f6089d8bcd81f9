"""Redaction: the values of the secrets tidegate knows become *** in every text it stores or
prints of a job or a model failure; which variables hold them is the project's to say."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tidegate.domain.command import STDERR_TAIL_BYTES, tail
from tidegate.domain.secrets import MASK, Redactor, Secrets, redact
from tidegate.project.config import read_project_file

PASSWORD = "hunter2-planted"
TOKEN = "tok-3f9a"


def test_every_occurrence_of_every_secret_is_masked() -> None:
    text = f"login {PASSWORD} failed; retry with {PASSWORD} and bearer {TOKEN}\n"
    assert redact(text, [PASSWORD, TOKEN]) == "login *** failed; retry with *** and bearer ***\n"


def test_the_longest_secret_is_masked_first() -> None:
    # a secret holding another: masking the shorter first would leave the rest of the longer
    assert redact("pw=abcd1234", ["abcd", "abcd1234"]) == f"pw={MASK}"
    assert Redactor(["abcd", "abcd1234", None]).secrets == ("abcd1234", "abcd")


def test_empty_and_short_values_are_left_alone() -> None:
    # a variable set to "" or "1" would shred ordinary text, and holds no real secret
    assert redact("exit 1 after 0 rows: abc", ["", "1", "0", "abc", None]) == (
        "exit 1 after 0 rows: abc"
    )
    assert not Redactor(["", "abc"])
    assert redact("abcd", ["abcd"]) == MASK


def test_secrets_are_matched_literally() -> None:
    # characters of regular expressions in a password mean nothing special
    assert redact("a.b*c+d? then aXb", ["a.b*c+d?", "a.b"]) == f"{MASK} then aXb"


def test_adding_values_and_optional_text() -> None:
    redactor = Redactor([PASSWORD]).adding([TOKEN, "x"])
    assert redactor(f"{PASSWORD}:{TOKEN}:x") == f"{MASK}:{MASK}:x"
    assert redactor.optional(None) is None
    assert redactor.optional(PASSWORD) == MASK
    assert Redactor()("unchanged") == "unchanged"


@given(st.text(), st.lists(st.text(min_size=4), max_size=4))
def test_no_secret_is_left_in_the_redacted_text(text: str, secrets: list[str]) -> None:
    planted = text + "".join(f" {s} " for s in secrets)
    redacted = redact(planted, secrets)
    # no more of a secret is left than the text around it held (a secret with a `*` in it
    # could be made of masks)
    for secret in secrets:
        if "*" not in secret:
            assert redacted.count(secret) <= text.count(secret)


def test_the_secrets_of_a_project_are_read_from_the_variables_it_names() -> None:
    secrets = Secrets(
        {"STATE_PW": "the [state] password_env", "PGPASSWORD": "libpq's password variable"},
        {"STATE_PW": PASSWORD, "PGPASSWORD": "pg-pass-1", "OTHER": "not-a-secret"},
    )
    assert secrets.redactor()(f"{PASSWORD} pg-pass-1 not-a-secret") == "*** *** not-a-secret"
    # a variable that is not set holds nothing to hide
    assert Secrets({"UNSET": "the [state] password_env"}, {}).redactor().secrets == ()


def test_a_stderr_tail_is_redacted_before_it_is_cut() -> None:
    # the secret straddles the cut: cutting first would keep a part of it
    secret = "".join(chr(ord("A") + n % 26) for n in range(50))
    data = b"x" * 10 + secret.encode() + b"y" * (STDERR_TAIL_BYTES - 25)
    assert secret[25:] in tail(data)
    cut = tail(data, Redactor([secret]))
    assert not any(c.isupper() for c in cut) and len(cut.encode()) <= STDERR_TAIL_BYTES
    lines = b"".join(f"line {n} {secret}\n".encode() for n in range(200))
    cut = tail(lines, Redactor([secret]))
    assert cut.endswith(f"line 199 {MASK}\n") and not any(c.isupper() for c in cut)


def test_the_project_names_its_secret_variables(tmp_path: Path) -> None:
    (tmp_path / "tidegate.toml").write_text(
        '[project]\nname = "x"\n\n'
        '[warehouse]\nengine = "postgres"\ndsn = "postgresql://etl@db/lake"\n'
        'password_env = "LAKE_PW"\n\n'
        '[state]\nurl = "postgresql://etl@db/ledger"\npassword_env = "STATE_PW"\n\n'
        '[[notify]]\nname = "hook"\nkind = "http"\nurl = "https://hooks.example/x"\n'
        'token_env = "HOOK_TOKEN"\n\n'
        '[[notify]]\nname = "audit"\nkind = "file"\npath = "audit.jsonl"\n'
    )
    assert read_project_file(tmp_path).secret_variables() == {
        "PGPASSWORD": "libpq's password variable",
        "LAKE_PW": "the [warehouse] password_env",
        "STATE_PW": "the [state] password_env",
        "HOOK_TOKEN": "the token_env of [[notify]] hook",
    }
    (tmp_path / "tidegate.toml").write_text('[project]\nname = "x"\n')
    assert read_project_file(tmp_path).secret_variables() == {
        "PGPASSWORD": "libpq's password variable"
    }
