"""A command model's job as run for an attempt: what was started, with what environment, and
how it ended. What is recorded never holds a secret value.

A job runs with a minimal environment, never tidegate's whole one (which holds the passwords
and tokens its configuration names): BASE_VARIABLES and the locale's LC_* of tidegate's
environment, the model's `env` (values may reference tidegate's environment as ${NAME}), the
variables its `env_passthrough` names that are set, and tidegate's own TIDEGATE_* for the
partition. A variable that holds one of tidegate's secrets is never among them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from tidegate.domain.model import Program
from tidegate.domain.secrets import MASK, Redactor, Secrets, looks_secret

# ${NAME}: a value taken from tidegate's own environment (recorded masked: it may be a secret)
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
STDERR_TAIL_BYTES = 4000
# what every job gets of tidegate's environment: enough to find programs, a home for their
# caches and settings, the locale and time zone, a place for temporary files
BASE_VARIABLES = frozenset({"PATH", "HOME", "LANG", "TZ", "TMPDIR"})
LOCALE_PREFIX = "LC_"


@dataclass(frozen=True)
class CommandRecord:
    command: tuple[str, ...]
    # the variables tidegate set for the job (its own TIDEGATE_* and the model's env), masked
    environment: Mapping[str, str]
    started_at: str
    pid: int | None = None
    exit_code: int | None = None
    duration_ms: int | None = None
    stderr_tail: str | None = None
    ended_at: str | None = None


def is_secret(name: str, value: str) -> bool:
    return looks_secret(name) or bool(REFERENCE.search(value))


def resolve(declared: Sequence[tuple[str, str]], environ: Mapping[str, str]) -> dict[str, str]:
    """The declared variables with their ${NAME} references replaced from `environ`; raises
    KeyError naming a reference that is not set."""
    return {name: REFERENCE.sub(lambda m: environ[m.group(1)], value) for name, value in declared}


def masked(declared: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The declared variables as recorded: secret ones masked."""
    return {name: MASK if is_secret(name, value) else value for name, value in declared}


def tail(data: bytes, redactor: Redactor | None = None) -> str:
    """The end of a job's stderr, as text, whole lines when it was cut, its secrets masked."""
    if redactor is None:
        redactor = Redactor()
    # masked before the cut: a secret the cut goes through would leave a part of itself
    window = data[-(STDERR_TAIL_BYTES + redactor.longest) :]
    cut = redactor(window.decode(errors="replace")).encode()[-STDERR_TAIL_BYTES:]
    text = cut.decode(errors="replace")
    if len(data) > STDERR_TAIL_BYTES and "\n" in text:
        text = text.split("\n", 1)[1]
    return text


def job_environment(
    environ: Mapping[str, str],
    declared: Sequence[tuple[str, str]],
    passthrough: Sequence[str],
    own: Mapping[str, str],
    secret_variables: Collection[str],
) -> dict[str, str]:
    """What a job runs with (see the module's docstring); raises KeyError naming a ${NAME}
    reference that is not set. Refusing a model that names a secret variable is
    `secret_uses`'s: here a base variable a project made a secret is left out."""
    base = {
        name: value
        for name, value in environ.items()
        if (name in BASE_VARIABLES or name.startswith(LOCALE_PREFIX))
        and name not in secret_variables
    }
    passed = {name: environ[name] for name in passthrough if name in environ}
    return {**base, **passed, **resolve(declared, environ), **own}


@dataclass(frozen=True)
class SecretUse:
    """A model's `env` or `env_passthrough` handing one of tidegate's secrets to its job."""

    # where: env.NAME or env_passthrough
    key: str
    # how the model names it: the variable, or a ${NAME} reference in a value
    named: str
    variable: str
    # what makes it a secret: "the [state] password_env", …
    holds: str

    def message(self) -> str:
        return (
            f"{self.key}: {self.named} is {self.holds}: tidegate never gives its secrets to a job"
        )


def secret_uses(
    declared: Sequence[tuple[str, str]],
    passthrough: Sequence[str],
    secret_variables: Mapping[str, str],
) -> list[SecretUse]:
    """Each place where a model's environment would take a variable holding a secret of
    tidegate's (name → what names it): a declared name, a ${NAME} reference, a passed-through
    name."""
    found = []
    for name, value in declared:
        if name in secret_variables:
            found.append(SecretUse(f"env.{name}", name, name, secret_variables[name]))
        for referenced in REFERENCE.findall(value):
            if referenced in secret_variables:
                found.append(
                    SecretUse(
                        f"env.{name}",
                        f"${{{referenced}}}",
                        referenced,
                        secret_variables[referenced],
                    )
                )
    found += [
        SecretUse("env_passthrough", name, name, secret_variables[name])
        for name in passthrough
        if name in secret_variables
    ]
    return found


def job_secrets(
    declared: Sequence[tuple[str, str]], passthrough: Sequence[str], environ: Mapping[str, str]
) -> list[str]:
    """The values a job gets that its record would mask: declared under a secret-looking name
    or from a ${NAME} reference, or passed through under a secret-looking name. A reference
    that is not set gives nothing (the job does not run)."""
    values = [_resolved(value, environ) for name, value in declared if is_secret(name, value)]
    values += [environ.get(name) for name in passthrough if looks_secret(name)]
    return [v for v in values if v is not None]


def _resolved(value: str, environ: Mapping[str, str]) -> str | None:
    try:
        return REFERENCE.sub(lambda m: environ[m.group(1)], value)
    except KeyError:
        return None


def job_redactor(program: Program | None, secrets: Secrets) -> Redactor:
    """What masks the secrets in a model's failure: the project's, and those its job gets."""
    redactor = secrets.redactor()
    if program is None:
        return redactor
    return redactor.adding(job_secrets(program.env, program.passthrough, secrets.environ))
