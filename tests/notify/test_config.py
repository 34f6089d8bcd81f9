"""The [[notify]] and [[consumers]] tables: what a target needs, and that references resolve."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tidegate.notify.config import (
    Consumer,
    NotifyTarget,
    check_references,
    consumers_of,
    lineage_targets,
)
from tidegate.project import toml_errors

EXAMPLE = """
[[notify]]
name = "lineage"
kind = "http"
url = "https://lineage.example/api/v1/lineage"
token_env = "LINEAGE_TOKEN"
lineage = true

[[notify]]
name = "audit_log"
kind = "file"
path = ".tidegate/lineage.jsonl"
lineage = true

[[notify]]
name = "finance_hook"
kind = "http"
url = "http://127.0.0.1:9000/hook"
retry_base_seconds = 2
retry_max_seconds = 60

[[consumers]]
name = "finance"
model = "revenue_report"
notify = "finance_hook"
ack = "explicit"
"""


def parse(text: str) -> tuple[list[NotifyTarget], list[Consumer]]:
    data = toml_errors.loads(text)
    targets = [NotifyTarget.model_validate(t) for t in data.get("notify", [])]
    consumers = [Consumer.model_validate(c) for c in data.get("consumers", [])]
    check_references(targets, consumers)
    return targets, consumers


def test_the_documented_shape_parses() -> None:
    targets, consumers = parse(EXAMPLE)
    assert lineage_targets(targets) == ["lineage", "audit_log"]
    assert [c.notify for c in consumers_of(consumers, "revenue_report")] == ["finance_hook"]
    assert consumers_of(consumers, "daily_revenue") == []
    assert consumers[0].ack == "explicit"
    assert targets[0].timeout_seconds == 10 and targets[0].retry_max_seconds == 300


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ({"kind": "http", "path": "x"}, "kind http takes url"),
        ({"kind": "http", "url": "ftp://host/x"}, "must be http"),
        ({"kind": "http", "url": "https://user:pw@host/x"}, "token_env, not the url"),
        ({"kind": "file", "url": "http://host/"}, "kind file takes path"),
        ({"kind": "file", "path": "x", "token_env": "T"}, "kind file takes path"),
        ({"kind": "file", "path": "x", "retry_base_seconds": 9, "retry_max_seconds": 3}, "below"),
        ({"kind": "file", "path": "x", "token": "inline secret"}, "Extra inputs"),
        ({"kind": "smtp", "path": "x"}, "kind"),
    ],
)
def test_a_target_takes_what_its_kind_needs(target: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        NotifyTarget.model_validate({"name": "t", **target})


def test_references_must_resolve() -> None:
    file = NotifyTarget(name="log", kind="file", path="x")
    finance = Consumer(name="finance", model="revenue_report", notify="log")
    with pytest.raises(ValueError, match="log declared more than once"):
        check_references([file, file], [])
    with pytest.raises(ValueError, match="finance is declared more than once for revenue_report"):
        check_references([file], [finance, finance])
    with pytest.raises(ValueError, match="notifies 'nowhere'"):
        check_references([file], [finance.model_copy(update={"notify": "nowhere"})])
