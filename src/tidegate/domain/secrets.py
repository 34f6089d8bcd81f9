"""Redacting secrets: the values of the secrets tidegate knows become `***` in every text it
stores or prints of a job or a model failure (a job's stderr, an attempt's error).

The secrets tidegate knows are the values of the variables its configuration names
(`password_env` of the warehouse and the ledger, `token_env` of notify targets, libpq's
PGPASSWORD) and, for a command or dbt model, the values its job gets under a name that looks
secret or from a `${NAME}` reference (those its command record masks). Values shorter than
MIN_LENGTH are left alone: masking every "1" or "eu" would shred ordinary text, and no real
secret is that short.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

MASK = "***"
MIN_LENGTH = 4
# a variable whose name holds one of these words holds a secret
SECRET_WORDS = ("PASSWORD", "SECRET", "TOKEN", "KEY")


def looks_secret(name: str) -> bool:
    return any(word in name.upper() for word in SECRET_WORDS)


class Redactor:
    """Masks every occurrence of the secrets it was given, the longest first (so that a secret
    holding another is masked whole)."""

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        kept = {v for v in values if v is not None and len(v) >= MIN_LENGTH}
        self.secrets: tuple[str, ...] = tuple(sorted(kept, key=lambda v: (-len(v), v)))
        self._pattern = (
            re.compile("|".join(re.escape(s) for s in self.secrets)) if self.secrets else None
        )

    def __call__(self, text: str) -> str:
        return text if self._pattern is None else self._pattern.sub(MASK, text)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def optional(self, text: str | None) -> str | None:
        return None if text is None else self(text)

    def adding(self, values: Iterable[str | None]) -> Redactor:
        return Redactor((*self.secrets, *values))

    @property
    def longest(self) -> int:
        """The longest secret's length in UTF-8 bytes: how far into a cut text one may reach."""
        return max((len(s.encode()) for s in self.secrets), default=0)


def redact(text: str, secrets: Iterable[str | None]) -> str:
    return Redactor(secrets)(text)


@dataclass(frozen=True)
class Secrets:
    """The variables that hold a project's secrets (name → what names it, for messages) and the
    environment tidegate reads them from."""

    variables: Mapping[str, str] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=dict)

    def redactor(self) -> Redactor:
        return Redactor(self.environ.get(name) for name in self.variables)
