"""`tidegate ui`: the report's views, live, from the ledger — on 127.0.0.1 and read-only.

Only GET and HEAD are answered (anything else: 405), only for Host names of this machine (a web
page elsewhere cannot read the ledger through a rebound DNS name), and nothing is ever written:
every answer is read from the ledger, which writers in other processes keep changing. The page
polls `/api/view`; the view is rebuilt only when the ledger changed (its ETag), so an idle UI
costs one PRAGMA per poll.
"""

from __future__ import annotations

import errno
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tidegate.domain.errors import BusyError, TidegateError, UsageError
from tidegate.ops.context import Context
from tidegate.report.data import build_view
from tidegate.report.page import policy, render
from tidegate.terminal import echo

HOST = "127.0.0.1"
LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")
REFRESH_MS = 2000
JSON_POLICY = "default-src 'none'; frame-ancestors 'none'"


@dataclass
class Answer:
    status: int
    body: bytes
    content_type: str = "application/json"
    etag: str | None = None


class Views:
    """Answers for the UI, one at a time: the Context (project, ledger connection) is shared."""

    def __init__(self, ctx: Context, refresh_ms: int = REFRESH_MS) -> None:
        self.ctx = ctx
        self.refresh_ms = refresh_ms
        self._lock = threading.Lock()
        self._key: str | None = None
        self._view: dict[str, Any] = {}
        self._json = b""

    def _fresh(self) -> tuple[str, dict[str, Any], bytes]:
        # Partitions fall due as time passes: a new minute is a new view even on a quiet ledger.
        minute = int(self.ctx.clock.now().timestamp() // 60)
        key = f"{self.ctx.state.ledger_stamp()}-{minute}"
        if key != self._key:
            view = build_view(self.ctx, details=False, live=True)
            view["etag"] = key
            self._key, self._view = key, view
            self._json = json.dumps(view, separators=(",", ":")).encode()
        return self._key, self._view, self._json

    def page(self) -> Answer:
        with self._lock:
            _, view, _ = self._fresh()
            text = render(view, live=True, refresh_ms=self.refresh_ms)
        return Answer(HTTPStatus.OK, text.encode(), "text/html; charset=utf-8")

    def view(self, if_none_match: str | None) -> Answer:
        with self._lock:
            key, _, body = self._fresh()
        tag = f'"{key}"'
        if if_none_match == tag:
            return Answer(HTTPStatus.NOT_MODIFIED, b"", etag=tag)
        return Answer(HTTPStatus.OK, body, etag=tag)

    def document(self, make: Callable[[], dict[str, Any]]) -> Answer:
        """A command's --json document (status, show partition, show run), or its error."""
        with self._lock:
            try:
                document = make()
            except TidegateError as error:
                return _error(HTTPStatus.NOT_FOUND, str(error), error.exit_code)
        return Answer(HTTPStatus.OK, (json.dumps(document, indent=2, default=str) + "\n").encode())


def _error(status: int, message: str, code: int = 2) -> Answer:
    document = {
        "schema": "tidegate.error/v1",
        "error": " ".join(message.splitlines()),
        "exit_code": code,
    }
    return Answer(status, json.dumps(document).encode())


def route(views: Views, path: str, query: dict[str, list[str]], headers: Any) -> Answer:
    """The answer to GET `path`."""
    from tidegate.ops.status import show_partition, show_run, status

    ctx = views.ctx

    def arg(name: str) -> str:
        values = query.get(name)
        if not values:
            raise UsageError(f"missing ?{name}=")
        return values[0]

    if path in ("/", "/index.html"):
        return views.page()
    if path == "/api/view":
        return views.view(headers.get("If-None-Match"))
    if path == "/api/status":
        model = query.get("model", [None])[0]
        return views.document(lambda: status(ctx, model))
    if path == "/api/partition":
        return views.document(lambda: show_partition(ctx, arg("model"), arg("partition")))
    if path == "/api/run":
        return views.document(lambda: show_run(ctx, arg("id")))
    return _error(HTTPStatus.NOT_FOUND, f"no such page: {path}")


class Handler(BaseHTTPRequestHandler):
    server: UIServer
    server_version = "tidegate-ui"
    sys_version = ""

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def _read_only(self) -> None:
        answer = _error(
            HTTPStatus.METHOD_NOT_ALLOWED, "tidegate ui is read-only: GET and HEAD only"
        )
        self._send(answer, send_body=True, extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_TRACE = do_CONNECT = _read_only

    def _answer(self, send_body: bool) -> None:
        host = (self.headers.get("Host") or "").lower()
        if host not in self.server.hosts:
            self._send(_error(HTTPStatus.MISDIRECTED_REQUEST, f"unknown host {host!r}"), send_body)
            return
        parts = urlsplit(self.path)
        try:
            answer = route(self.server.views, parts.path, parse_qs(parts.query), self.headers)
        except Exception as error:  # one line for the page; the server goes on
            echo(f"tidegate ui: {type(error).__name__}: {error}", err=True)
            answer = _error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(error).__name__}: {error}", 1)
        self._send(answer, send_body)

    def _send(self, answer: Answer, send_body: bool, extra: dict[str, str] | None = None) -> None:
        self.send_response(answer.status)
        html = answer.content_type.startswith("text/html")
        headers = {
            "Content-Type": answer.content_type,
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY",
            "Content-Security-Policy": policy(live=True) + "; frame-ancestors 'none'"
            if html
            else JSON_POLICY,
            **(extra or {}),
        }
        if answer.etag:
            headers["ETag"] = answer.etag
        if answer.status != HTTPStatus.NOT_MODIFIED:
            headers["Content-Length"] = str(len(answer.body))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body and answer.status != HTTPStatus.NOT_MODIFIED:
            self.wfile.write(answer.body)

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged: the page polls every few seconds."""


class UIServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, views: Views, port: int) -> None:
        self.views = views
        try:
            super().__init__((HOST, port), Handler)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise BusyError(
                    f"port {port} on {HOST} is in use (another tidegate ui?); "
                    "pass --port N, or --port 0 for a free one"
                ) from None
            raise UsageError(f"cannot listen on {HOST}:{port}: {error.strerror or error}") from None
        self.port = int(self.server_address[1])
        self.hosts = {f"{name}:{self.port}" for name in LOCAL_NAMES}

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"
