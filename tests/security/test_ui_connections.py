"""`tidegate ui` under clients that idle, send half a request, or hang up mid-answer: idle and
half-sent connections hold no thread and are closed after the request timeout, a bounded pool
of threads answers, and a client gone mid-answer is one line on stderr, never a traceback."""

from __future__ import annotations

import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from http import HTTPStatus
from pathlib import Path

import pytest

from tests.kit import example_project
from tests.report.kit import serving
from tidegate.ops.context import Context
from tidegate.report import server as server_module
from tidegate.report.server import REQUEST_TIMEOUT_SECONDS, WORKERS, Answer, UIServer, Views

HALF_SENT = b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # no blank line: never ends
SHORT_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return example_project(tmp_path_factory.mktemp("limits") / "proj", rows_per_day=3)


@contextmanager
def in_thread(views: Views, timeout: float = SHORT_TIMEOUT) -> Iterator[UIServer]:
    """A UI server in this process, serving until the block ends; its workers are done then."""
    server = UIServer(views, 0, request_timeout=timeout)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(30)
        assert not thread.is_alive()


@contextmanager
def context(project: Path) -> Iterator[Context]:
    ctx = Context(project)
    try:
        yield ctx
    finally:
        ctx.close()


def connect(port: int, send: bytes = b"") -> socket.socket:
    client = socket.create_connection(("127.0.0.1", port), timeout=30)
    if send:
        client.sendall(send)
    return client


def status_of(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=30) as answer:
        return int(answer.status)


def threads_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads")))


def closed_by_server(client: socket.socket) -> float:
    """Seconds until the server closes `client` (its end of file), reading whatever comes."""
    began = time.monotonic()
    while client.recv(4096):
        pass
    return time.monotonic() - began


def test_idle_and_half_sent_connections_hold_no_thread(project: Path) -> None:
    with serving(project) as ui, ExitStack() as clients:
        port = int(ui.url.rsplit(":", 1)[1].rstrip("/"))
        for number in range(100):
            clients.enter_context(connect(port, HALF_SENT if number % 2 else b""))
        began = time.monotonic()
        # accepted in order: the 100 before it have been by the time this one is answered
        assert status_of(port) == HTTPStatus.OK
        assert time.monotonic() - began < REQUEST_TIMEOUT_SECONDS
        # the main thread and the pool's: not one per connection
        assert threads_of(ui.process.pid) <= 1 + WORKERS


def test_a_half_sent_or_idle_request_is_closed_after_the_timeout(project: Path) -> None:
    with context(project) as ctx, in_thread(Views(ctx)) as server:
        for sent in (HALF_SENT, b""):
            with connect(server.port, sent) as client:
                waited = closed_by_server(client)
            assert SHORT_TIMEOUT / 2 <= waited < SHORT_TIMEOUT + 5, sent
        assert status_of(server.port) == HTTPStatus.OK


def test_connections_past_the_limit_wait_in_the_backlog(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "MAX_OPEN", 4)
    with context(project) as ctx, in_thread(Views(ctx)) as server, ExitStack() as clients:
        for _ in range(4):
            clients.enter_context(connect(server.port, HALF_SENT))
        began = time.monotonic()
        # accepted once the held ones time out, not refused
        assert status_of(server.port) == HTTPStatus.OK
        assert time.monotonic() - began >= SHORT_TIMEOUT / 2


def test_a_trickled_request_is_closed_at_its_deadline(project: Path) -> None:
    # a byte now and then would keep a timeout per read waiting for ever
    with context(project) as ctx, in_thread(Views(ctx)) as server, connect(server.port) as client:
        began = time.monotonic()
        client.sendall(HALF_SENT + b"X-Trickle: ")
        with pytest.raises(OSError):  # once closed, a send meets the reset
            while time.monotonic() - began < SHORT_TIMEOUT + 5:
                client.sendall(b"x")
                time.sleep(SHORT_TIMEOUT / 10)
        assert time.monotonic() - began >= SHORT_TIMEOUT / 2


class Held(Views):
    """The page's answer is held until the client has hung up, then is large: writing it
    meets the closed connection."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.asked = threading.Event()
        self.release = threading.Event()

    def page(self) -> Answer:
        self.asked.set()
        assert self.release.wait(30)
        return Answer(HTTPStatus.OK, b"x" * 16_000_000, "text/html; charset=utf-8")


def test_a_client_hanging_up_mid_answer_is_one_line(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with context(project) as ctx:
        views = Held(ctx)
        with in_thread(views, timeout=30) as server:
            port = server.port
            client = connect(port, f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            assert views.asked.wait(30)
            # a reset, not an orderly close: the client is gone
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
            views.release.set()
            assert status_of(port) == HTTPStatus.OK  # and the server goes on
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = err.splitlines()
    assert line.startswith("tidegate ui: the client at 127.0.0.1:") and "GET /" in line, line
