"""The `[[notify]]` and `[[consumers]]` tables of tidegate.toml.

[[notify]]
name = "lineage"                    # what consumers and the outbox call it
kind = "http"                       # http | file
url = "https://lineage.example/api/v1/lineage"
token_env = "LINEAGE_TOKEN"         # sent as `Authorization: Bearer …`; never stored
lineage = true                      # receives every OpenLineage run event

[[notify]]
name = "audit_log"
kind = "file"
path = ".tidegate/lineage.jsonl"    # relative to the project; one JSON document a line
lineage = true

[[consumers]]
name = "finance"
model = "revenue_report"
notify = "finance_hook"             # a [[notify]] name: taint, re-read and publish notices
ack = "notified"                    # or "explicit": consumed only after `tidegate ack`
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NotifyTarget(_Strict):
    name: str = Field(pattern=IDENTIFIER)
    kind: Literal["http", "file"]
    url: str | None = None
    path: str | None = None
    # the name of an environment variable holding a bearer token: the secret itself never
    # enters the configuration, the ledger or any output
    token_env: str | None = Field(default=None, pattern=ENV_NAME)
    timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    # retries wait base, 2 × base, 4 × base … up to max after each failed attempt
    retry_base_seconds: float = Field(default=1.0, gt=0)
    retry_max_seconds: float = Field(default=300.0, gt=0)
    lineage: bool = False

    @model_validator(mode="after")
    def _kind_fields(self) -> NotifyTarget:
        if self.kind == "http":
            if self.url is None or self.path is not None:
                raise ValueError(f"notify {self.name}: kind http takes url, not path")
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"notify {self.name}: url must be http:// or https://HOST/…")
            if parts.username is not None or parts.password is not None:
                # a URL is printed in status and errors; a credential in it would leak
                raise ValueError(f"notify {self.name}: put credentials in token_env, not the url")
        elif self.path is None or self.url is not None or self.token_env is not None:
            raise ValueError(f"notify {self.name}: kind file takes path (no url or token_env)")
        if self.retry_max_seconds < self.retry_base_seconds:
            raise ValueError(f"notify {self.name}: retry_max_seconds is below retry_base_seconds")
        return self


class Consumer(_Strict):
    name: str = Field(pattern=IDENTIFIER)
    model: str = Field(pattern=IDENTIFIER)
    notify: str = Field(pattern=IDENTIFIER)
    ack: Literal["notified", "explicit"] = "notified"


def check_references(targets: Sequence[NotifyTarget], consumers: Sequence[Consumer]) -> None:
    """Raise ValueError unless target names are unique, each consumer is declared once per model,
    and every consumer names a declared target. (Whether the model exists is the project's to
    check: models live in models/, not in tidegate.toml.)"""
    names = [t.name for t in targets]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"notify: {', '.join(twice)} declared more than once")
    pairs = [(c.name, c.model) for c in consumers]
    repeated = sorted({p for p in pairs if pairs.count(p) > 1})
    if repeated:
        name, model = repeated[0]
        raise ValueError(f"consumers: {name} is declared more than once for {model}")
    for consumer in consumers:
        if consumer.notify not in names:
            raise ValueError(
                f"consumers: {consumer.name} notifies {consumer.notify!r}, which no [[notify]] "
                "declares"
            )


def lineage_targets(targets: Sequence[NotifyTarget]) -> list[str]:
    """The targets every OpenLineage run event goes to."""
    return [t.name for t in targets if t.lineage]


def consumers_of(consumers: Sequence[Consumer], model: str) -> list[Consumer]:
    """The consumers registered for `model`, in declaration order."""
    return [c for c in consumers if c.model == model]
