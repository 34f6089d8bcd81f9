"""The outbox against real targets: a local HTTP server that is down at first, and a file.

Nothing is lost while the endpoint is down, each target gets its events in order and once, retries
back off on a controlled clock, and a bearer token never leaves the request.
"""

from __future__ import annotations

import json
import socket
import threading
import traceback
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from tidegate.domain.clock import FixedClock
from tidegate.notify.config import NotifyTarget
from tidegate.notify.outbox import DeliveryFailed, backoff, deliver, enqueue
from tidegate.notify.targets import Dispatcher
from tidegate.state.sqlite import SQLiteStateStore

T0 = datetime(2025, 1, 2, tzinfo=timezone.utc)
SECRET = "tg-s3cr3t-9f8e7d6c5b4a"
TOKEN_ENV = "TIDEGATE_TEST_HOOK_TOKEN"


def at(seconds: float) -> FixedClock:
    return FixedClock(T0 + timedelta(seconds=seconds))


def iso(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="microseconds")


class Endpoint:
    """A real HTTP endpoint on 127.0.0.1 that answers `status` and records what it accepted."""

    def __init__(self, port: int) -> None:
        self.status = 503
        self.location: str | None = None
        self.accepted: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                authorization = self.headers.get("Authorization")
                endpoint.authorizations.append(authorization)
                if endpoint.status < 300:
                    endpoint.accepted.append(json.loads(body))
                # an endpoint that echoes the credential back must not make tidegate leak it
                self.send_response(endpoint.status, f"unavailable for {authorization}")
                self.send_header("Content-Length", "0")
                if endpoint.location is not None:
                    self.send_header("Location", endpoint.location)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", port), Handler)
        # a short poll keeps shutdown quick; requests are served as they come either way
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


def free_port() -> int:
    """A port nothing listens on (yet): connecting to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def state_path(tmp_path: Path) -> Path:
    return tmp_path / ".tidegate" / "state.db"


@pytest.fixture
def store(state_path: Path) -> Iterator[SQLiteStateStore]:
    opened = SQLiteStateStore(state_path)
    try:
        yield opened
    finally:
        opened.close()


def hook(port: int, **settings: Any) -> NotifyTarget:
    return NotifyTarget(
        name="hook",
        kind="http",
        url=f"http://127.0.0.1:{port}/lineage",
        token_env=TOKEN_ENV,
        timeout_seconds=5,
        **settings,
    )


def journal() -> NotifyTarget:
    return NotifyTarget(name="journal", kind="file", path="out/lineage.jsonl")


def test_events_written_while_the_endpoint_is_down_arrive_in_order_once(
    tmp_path: Path, state_path: Path
) -> None:
    port = free_port()
    targets = [hook(port), journal()]
    send = Dispatcher(tmp_path, env={TOKEN_ENV: SECRET})
    documents = [{"n": n} for n in range(1, 4)]
    store = SQLiteStateStore(state_path)
    enqueue(store, [("hook", d) for d in documents] + [("journal", documents[0])], at(0))

    # nothing listens: refused; the file target is not held up by it
    report = deliver(store, targets, at(0), send)
    assert len(report.delivered) == 1
    [failure] = report.failures
    assert (failure.target, failure.attempts, failure.next_attempt_at) == ("hook", 1, iso(1))
    assert failure.error.startswith("cannot reach the endpoint")
    # not due yet: no attempt at all, and the later rows wait behind the first
    assert deliver(store, targets, at(0.5), send).failures == ()
    assert [r.attempts for r in store.outbox("hook")] == [1, 0, 0]
    assert deliver(store, targets, at(1), send).failures[0].next_attempt_at == iso(1 + 2)

    # another process picks the queue up: the outbox lives in the ledger
    store.close()
    store = SQLiteStateStore(state_path)
    endpoint = Endpoint(port)
    try:
        [failure] = deliver(store, targets, at(3), send).failures
        assert failure.error == "HTTP 503 unavailable for Bearer ***"
        assert (failure.attempts, failure.next_attempt_at) == (3, iso(3 + 4))
        late = {"n": 4}
        enqueue(store, [("hook", late)], at(5))
        endpoint.status = 200
        assert deliver(store, targets, at(6), send).delivered == ()
        report = deliver(store, targets, at(7), send)
        assert report.failures == ()
        assert endpoint.accepted == [*documents, late]
        # called again, later: nothing is sent twice
        assert deliver(store, targets, at(100), send).delivered == ()
        assert endpoint.accepted == [*documents, late]
        assert endpoint.authorizations == [f"Bearer {SECRET}"] * 5
    finally:
        endpoint.close()
        store.close()

    store = SQLiteStateStore(state_path)
    try:
        rows = store.outbox("hook")
        assert [r.attempts for r in rows] == [4, 1, 1, 1]
        assert [r.delivered_at for r in rows] == [iso(7)] * 4
        assert rows[0].last_error == "HTTP 503 unavailable for Bearer ***"
        assert store.outbox(pending_only=True) == []
    finally:
        store.close()
    lines = (tmp_path / "out" / "lineage.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [documents[0]]


def test_retries_back_off_exponentially_up_to_the_cap() -> None:
    target = hook(1, retry_base_seconds=1, retry_max_seconds=300)
    waits = [backoff(target, attempts).total_seconds() for attempts in range(1, 12)]
    assert waits == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]
    assert backoff(target, 10**9) == timedelta(seconds=300)
    quick = hook(1, retry_base_seconds=0.5, retry_max_seconds=3)
    assert [backoff(quick, n).total_seconds() for n in (1, 2, 3, 4)] == [0.5, 1, 2, 3]


def test_a_file_target_appends_one_document_per_line(
    tmp_path: Path, store: SQLiteStateStore
) -> None:
    documents = [{"kind": "taint", "reason": "line one\nline two"}, {"kind": "reread"}]
    enqueue(store, [("journal", d) for d in documents], at(0))
    report = deliver(store, [journal()], at(0), Dispatcher(tmp_path, env={}))
    assert len(report.delivered) == 2
    enqueue(store, [("journal", {"kind": "published"})], at(1))
    deliver(store, [journal()], at(1), Dispatcher(tmp_path, env={}))
    lines = (tmp_path / "out" / "lineage.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [*documents, {"kind": "published"}]


def test_a_file_target_that_cannot_be_written_is_retried(
    tmp_path: Path, store: SQLiteStateStore
) -> None:
    (tmp_path / "out").write_text("a file where the folder should be")
    enqueue(store, [("journal", {"n": 1})], at(0))
    [failure] = deliver(store, [journal()], at(0), Dispatcher(tmp_path, env={})).failures
    assert failure.error.startswith("cannot append to")
    (tmp_path / "out").unlink()
    assert len(deliver(store, [journal()], at(1), Dispatcher(tmp_path, env={})).delivered) == 1


def test_rows_of_an_unconfigured_target_stay_queued(
    tmp_path: Path, store: SQLiteStateStore
) -> None:
    enqueue(store, [("retired", {"n": 1})], at(0))
    assert deliver(store, [journal()], at(0), Dispatcher(tmp_path, env={})).delivered == ()
    assert [r.target for r in store.outbox(pending_only=True)] == ["retired"]


def test_a_missing_token_is_a_failure_naming_the_variable(
    tmp_path: Path, store: SQLiteStateStore
) -> None:
    enqueue(store, [("hook", {"n": 1})], at(0))
    [failure] = deliver(store, [hook(free_port())], at(0), Dispatcher(tmp_path, env={})).failures
    assert failure.error == f"environment variable {TOKEN_ENV} is not set"


def test_a_redirect_is_a_failure_and_the_token_does_not_follow_it(tmp_path: Path) -> None:
    elsewhere = Endpoint(0)
    elsewhere.status = 200
    redirecting = Endpoint(0)
    redirecting.status = 307
    redirecting.location = f"http://127.0.0.1:{elsewhere.port}/"
    try:
        with pytest.raises(DeliveryFailed, match="HTTP 307"):
            Dispatcher(tmp_path, env={TOKEN_ENV: SECRET})(hook(redirecting.port), "{}")
        assert elsewhere.authorizations == []
    finally:
        redirecting.close()
        elsewhere.close()


def test_the_token_appears_in_no_row_error_or_file(tmp_path: Path, state_path: Path) -> None:
    endpoint = Endpoint(0)
    target = hook(endpoint.port)
    send = Dispatcher(tmp_path, env={TOKEN_ENV: SECRET})
    store = SQLiteStateStore(state_path)
    try:
        enqueue(store, [("hook", {"n": 1}), ("journal", {"n": 1})], at(0))
        report = deliver(store, [target, journal()], at(0), send)
        with pytest.raises(DeliveryFailed) as raised:
            send(target, "{}")
        endpoint.status = 200
        delivered = deliver(store, [target], at(60), send)
        rows = store.outbox()
    finally:
        endpoint.close()
        store.close()
    assert endpoint.authorizations == [f"Bearer {SECRET}"] * 3  # it was sent, in the header only
    assert len(delivered.delivered) == 1
    seen = [
        repr(report),
        repr(delivered),
        repr(rows),
        repr(target),
        target.model_dump_json(),
        str(raised.value),
        "".join(traceback.format_exception(raised.value)),
    ]
    assert all(SECRET not in text for text in seen)
    for path in tmp_path.rglob("*"):  # the ledger, its WAL, the journal
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
