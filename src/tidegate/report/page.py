"""One self-contained page: the template with its CSS, its script and the view model inline.

Nothing is fetched from anywhere: the Content-Security-Policy allows only the page's own script
and style (by hash) and, for the live UI, requests to the server it came from. Whatever came
from users reaches the page as JSON data, never as markup, and the script writes it as text.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from functools import cache
from importlib import resources
from typing import Any

PLACEHOLDER = re.compile(r"\{\{([A-Z_]+)\}\}")
# Characters that could end or confuse a <script> element, or a JavaScript string literal,
# written as JSON escapes: the text stays the same JSON value.
_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


@cache
def asset(name: str) -> str:
    return (resources.files("tidegate.report") / "assets" / name).read_text(encoding="utf-8")


def script_json(document: Any) -> str:
    """`document` as JSON that is safe inside a <script type="application/json"> element: no
    `</script`, `<!--` or `<script` can appear in it, so nothing a user wrote ends the element."""
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return re.sub("[<>&\u2028\u2029]", lambda m: _JSON_ESCAPES[m[0]], text)


def _hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def policy(live: bool) -> str:
    """The Content-Security-Policy of the page (also sent as a header by the UI server)."""
    return "; ".join(
        (
            "default-src 'none'",
            f"script-src '{_hash(asset('report.js'))}'",
            f"style-src '{_hash(asset('report.css'))}'",
            "img-src data:",
            "connect-src 'self'" if live else "connect-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        )
    )


def render(view: dict[str, Any], *, live: bool, refresh_ms: int = 2000) -> str:
    """The page for `view` (see report.data): the file report, or the live UI's first paint."""
    script, style = asset("report.js"), asset("report.css")
    if "</" in script or "</" in style:
        raise AssertionError("an inline asset must not contain '</'")  # a packaging bug
    values = {
        "TITLE": html.escape(f"tidegate — {view['project']}"),
        "POLICY": html.escape(policy(live)),
        "STYLE": style,
        "SCRIPT": script,
        "DATA": script_json(view),
        "BOOT": script_json({"live": live, "refresh_ms": refresh_ms}),
    }
    # one pass: text put in is never scanned for placeholders again
    return PLACEHOLDER.sub(lambda m: values[m[1]], asset("report.html"))
