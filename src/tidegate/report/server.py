"""`tidegate ui`: the report's views, live, from the ledger — on 127.0.0.1 and read-only.

Only GET and HEAD are answered (anything else: 405), only for Host names of this machine (a web
page elsewhere cannot read the ledger through a rebound DNS name), and nothing is ever written:
every answer is read from the ledger, which writers in other processes keep changing. The page
polls `/api/view`; the view is rebuilt only when the ledger changed (its ETag), so an idle UI
costs one PRAGMA per poll.

A client cannot hold the server: a connection gets no thread until its request's head has
arrived whole, which must happen within REQUEST_TIMEOUT_SECONDS of its accept (else it is
closed); WORKERS threads answer; a client that hangs up mid-answer is one line on stderr.
"""

from __future__ import annotations

import errno
import io
import json
import selectors
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
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
# A request's head must arrive whole within this many seconds of its connection, and each
# answer be taken by its client within as many: an idle or half-sent connection is closed then.
REQUEST_TIMEOUT_SECONDS = 5.0
WORKERS = 8  # threads answering requests; the page sends a few at a time
MAX_OPEN = 256  # connections held at once, far below the usual limit of 1024 open files
BACKLOG = 128  # connections the kernel holds for us beyond MAX_OPEN
MAX_HEAD_BYTES = 64 * 1024  # http.server's own limit on one line of a request
READ_BYTES = 16 * 1024
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
    """One request, whose head the server has already read whole (`head`): a thread is given
    to a connection only once it has said what it wants, so it answers at once."""

    server: UIServer
    server_version = "tidegate-ui"
    sys_version = ""

    def __init__(
        self, request: socket.socket, client_address: Any, server: UIServer, head: bytes = b""
    ) -> None:
        self.head = head
        self.requestline = ""
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout)  # a client that never reads
        self.rfile.close()
        self.rfile = io.BytesIO(self.head)

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

    def handle(self) -> None:
        try:
            super().handle()
        except ConnectionError as error:
            # the page polls: a tab closed while its answer was on the way is ordinary
            host, port = self.client_address[:2]
            echo(
                f"tidegate ui: the client at {host}:{port} hung up before the answer to "
                f"{self.requestline} was sent ({error.strerror or type(error).__name__})",
                err=True,
            )

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged: the page polls every few seconds."""


@dataclass
class _Waiting:
    """A connection whose request's head has not arrived whole yet."""

    address: Any
    deadline: float
    head: bytearray = field(default_factory=bytearray)


class UIServer(HTTPServer):
    """The UI's HTTP server: one thread (serve_forever's) waits for connections and reads
    their requests' heads; a pool of `workers` threads answers the requests read whole.

    ThreadingHTTPServer gave each connection a thread until its client closed it, so idle or
    half-sent connections held as many threads. Here a connection holds a socket and a buffer
    while it is read, at most `request_timeout` seconds from its accept (one byte now and then
    does not extend it); then it is closed. At most MAX_OPEN connections are held at once; more
    wait in the listen backlog until one is done.
    """

    request_queue_size = BACKLOG

    def __init__(
        self,
        views: Views,
        port: int,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
        workers: int = WORKERS,
    ) -> None:
        self.views = views
        self.request_timeout = request_timeout
        # before binding: a failed bind calls server_close
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="tidegate-ui")
        self._waiting: dict[socket.socket, _Waiting] = {}  # in accept order: deadline order
        self._open = 0  # waiting, queued for the pool or being answered
        self._count = threading.Lock()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        try:
            super().__init__((HOST, port), Handler)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise BusyError(
                    f"port {port} on {HOST} is in use (another tidegate ui?); "
                    "pass --port N, or --port 0 for a free one"
                ) from None
            raise UsageError(f"cannot listen on {HOST}:{port}: {error.strerror or error}") from None
        self.socket.setblocking(False)
        self.port = int(self.server_address[1])
        self.hosts = {f"{name}:{self.port}" for name in LOCAL_NAMES}

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._stopped.clear()
        try:
            with selectors.DefaultSelector() as selector:
                self._serve(selector, poll_interval)
        finally:
            for connection in list(self._waiting):
                self._drop(connection)
            self._stop.clear()
            self._stopped.set()

    def _serve(self, selector: selectors.BaseSelector, poll_interval: float) -> None:
        listening = False
        while not self._stop.is_set():
            with self._count:
                room = self._open < MAX_OPEN
            if room != listening:
                if room:
                    selector.register(self.socket, selectors.EVENT_READ)
                else:
                    selector.unregister(self.socket)
                listening = room
            # a finished answer makes room without waking the selector: look again soon
            wait = poll_interval if listening else min(poll_interval, 0.05)
            first = next(iter(self._waiting.values()), None)
            if first is not None:
                wait = max(0.0, min(wait, first.deadline - time.monotonic()))
            for key, _ in selector.select(wait):
                if key.fileobj is self.socket:
                    self._accept(selector)
                else:
                    self._receive(selector, self._connection(key))
            self._expire(selector)

    @staticmethod
    def _connection(key: selectors.SelectorKey) -> socket.socket:
        connection = key.fileobj
        assert isinstance(connection, socket.socket)
        return connection

    def _accept(self, selector: selectors.BaseSelector) -> None:
        try:
            connection, address = self.socket.accept()
        except OSError:  # the client gave up before its accept (or none is left to take)
            return
        connection.setblocking(False)
        with self._count:
            self._open += 1
        self._waiting[connection] = _Waiting(address, time.monotonic() + self.request_timeout)
        selector.register(connection, selectors.EVENT_READ)

    def _receive(self, selector: selectors.BaseSelector, connection: socket.socket) -> None:
        waiting = self._waiting[connection]
        try:
            data = connection.recv(READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        waiting.head += data
        if b"\r\n\r\n" in waiting.head or b"\n\n" in waiting.head:
            selector.unregister(connection)
            del self._waiting[connection]
            connection.setblocking(True)
            self._pool.submit(self._answer, connection, waiting.address, bytes(waiting.head))
        elif not data or len(waiting.head) > MAX_HEAD_BYTES:  # gone, or no request of the page's
            selector.unregister(connection)
            self._drop(connection)

    def _expire(self, selector: selectors.BaseSelector) -> None:
        now = time.monotonic()
        while self._waiting:
            connection, waiting = next(iter(self._waiting.items()))
            if waiting.deadline > now:
                return
            selector.unregister(connection)
            self._drop(connection)

    def _drop(self, connection: socket.socket) -> None:
        """Close a connection whose request never came whole."""
        self._waiting.pop(connection, None)
        connection.close()
        with self._count:
            self._open -= 1

    def _answer(self, connection: socket.socket, address: Any, head: bytes) -> None:
        try:
            Handler(connection, address, self, head)
        except Exception as error:  # one line, and the server goes on
            echo(f"tidegate ui: {type(error).__name__}: {error}", err=True)
        finally:
            self.shutdown_request(connection)
            with self._count:
                self._open -= 1

    def shutdown(self) -> None:
        """Stop serve_forever (called from another thread) and wait until it has."""
        self._stop.set()
        self._stopped.wait()

    def server_close(self) -> None:
        super().server_close()
        for connection in list(self._waiting):
            self._drop(connection)
        # answers in progress finish: each write is bounded by request_timeout
        self._pool.shutdown(wait=True, cancel_futures=True)
