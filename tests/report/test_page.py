"""The page: user text reaches it only as JSON data that cannot end its <script> element, and
its Content-Security-Policy admits only its own script and style."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

import pytest

from tidegate.report.page import asset, policy, render, script_json

HOSTILE = [
    "</script><script>alert(1)</script>",
    "</SCRIPT >",
    "<!-- <script>",
    "a & b > c",
    "line\u2028separator\u2029",
    "\"quoted\" 'single' `back`",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_script_json_keeps_the_value_and_hides_every_angle_bracket(text: str) -> None:
    embedded = script_json({"reason": text, "list": [text]})
    assert json.loads(embedded) == {"reason": text, "list": [text]}
    assert not re.search(r"[<>&\u2028\u2029]", embedded)


def view(reason: str) -> dict[str, Any]:
    return {
        "project": "</title><script>alert(1)</script>",
        "as_of": "2025-01-01T00:00:00+00:00",
        "states": [],
        "models": [],
        "runs": [],
        "events": [{"reason": reason}],
    }


def test_user_text_appears_in_the_page_only_escaped() -> None:
    page = render(view("</script><script>window.__pwned=1</script>"), live=False)
    assert "__pwned" in page  # it is there, as data …
    assert page.count("<script") == 3  # … but only tidegate's three script elements exist
    assert "</title><script>" not in page
    assert page.count("</script>") == 3


def sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def test_the_policy_allows_exactly_the_inline_script_and_style() -> None:
    page = render(view("x"), live=False)
    script = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    style = re.findall(r"<style>(.*?)</style>", page, re.DOTALL)
    assert script == [asset("report.js")] and style == [asset("report.css")]
    report_policy = policy(live=False)
    assert f"script-src '{sha256(script[0])}'" in report_policy
    assert f"style-src '{sha256(style[0])}'" in report_policy
    assert "default-src 'none'" in report_policy
    assert "connect-src 'none'" in report_policy  # the file report asks nothing of anyone
    assert "connect-src 'self'" in policy(live=True)  # the live page polls its own server
    assert "unsafe-inline" not in report_policy and "unsafe-eval" not in report_policy


def test_the_assets_fetch_nothing_and_parse_no_markup() -> None:
    for name in ("report.html", "report.js", "report.css"):
        text = asset(name)
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text and "//cdn" not in text, name
        assert "innerHTML" not in text and "insertAdjacentHTML" not in text, name
        assert "document.write" not in text and "eval(" not in text, name
