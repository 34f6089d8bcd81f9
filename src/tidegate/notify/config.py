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
    """A `[[notify]]` table: where notices and OpenLineage events are delivered, through the
    ledger's outbox (in order per target, retried until delivered)."""

    name: str = Field(
        pattern=IDENTIFIER,
        description="What consumers (`notify = …`) and the outbox call the target; unique.",
    )
    kind: Literal["http", "file"] = Field(
        description="`http`: a POST of each JSON document to `url`. `file`: one JSON document a "
        "line appended to `path`."
    )
    url: str | None = Field(
        default=None,
        description="`http` (required): the endpoint, `http://` or `https://HOST/…`, with no "
        "credentials in it. Redirects are not followed.",
    )
    path: str | None = Field(
        default=None,
        description="`file` (required): the file, relative to the project.",
    )
    token_env: str | None = Field(
        default=None,
        pattern=ENV_NAME,
        description="`http`: the name of an environment variable holding a token, sent as "
        "`Authorization: Bearer …`. The secret itself never enters the configuration, the "
        "ledger, any output or a model's job.",
    )
    timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="How long one delivery may take before it counts as failed (at most 300).",
    )
    retry_base_seconds: float = Field(
        default=1.0,
        gt=0,
        description="The wait after the first failed delivery; each further failure doubles it "
        "(base, 2 × base, 4 × base, …) up to `retry_max_seconds`.",
    )
    retry_max_seconds: float = Field(
        default=300.0,
        gt=0,
        description="The longest wait between two tries (not below `retry_base_seconds`).",
    )
    lineage: bool = Field(
        default=False,
        description="Whether the target receives every OpenLineage run event (`START`, "
        "`COMPLETE`, `FAIL`) of `run`, `backfill`, `rerun` and `recover`.",
    )

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
    """A `[[consumers]]` table: an external reader of a model's partitions."""

    name: str = Field(
        pattern=IDENTIFIER,
        description="The consumer's name (`tidegate ack CONSUMER MODEL`); once per model.",
    )
    model: str = Field(pattern=IDENTIFIER, description="The model it reads.")
    notify: str = Field(
        pattern=IDENTIFIER,
        description="The `[[notify]]` target (by name) that receives its `published`, `taint` "
        "and `reread` notices.",
    )
    ack: Literal["notified", "explicit"] = Field(
        default="notified",
        description="When a partition counts as read (consumed, for the rerun judgment): once its "
        "`published` notice is delivered (`notified`), or once `tidegate ack` records it "
        "(`explicit`).",
    )


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
