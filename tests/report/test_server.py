"""`tidegate ui`: the views from the ledger on 127.0.0.1, GET only, answering as the commands do."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import run_process, state_dump, tidegate
from tests.report.kit import AS_OF, MODEL, UI, serving, staged_project


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return staged_project(tmp_path_factory.mktemp("ui") / "proj")


@pytest.fixture(scope="module")
def ui(project: Path) -> Iterator[UI]:
    with serving(project, "--as-of", AS_OF) as running:
        yield running


def printed(*args: str | Path) -> str:
    result = tidegate(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_it_listens_on_this_machine_only(ui: UI) -> None:
    assert ui.url.startswith("http://127.0.0.1:")
    status, headers, page = ui.get("/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY" and headers["Cache-Control"] == "no-store"
    assert '"live":true' in page


def test_api_status_is_status_json(ui: UI, project: Path) -> None:
    p = ("--project", project, "--as-of", AS_OF)
    assert ui.get("/api/status")[2] == printed("status", *p)
    assert ui.get(f"/api/status?model={MODEL}")[2] == printed("status", MODEL, *p)


def test_partition_and_run_answers_are_show_json(ui: UI, project: Path) -> None:
    p = ("--project", project)
    shown = printed("show", "partition", MODEL, "2025-03-02", *p)
    assert ui.get(f"/api/partition?model={MODEL}&partition=2025-03-02")[2] == shown
    run_id = json.loads(shown)["published"]["run_id"]
    assert ui.get(f"/api/run?id={run_id}")[2] == printed("show", "run", run_id, *p)


@pytest.mark.parametrize(
    "path",
    [
        "/api/partition?model=daily_revenue&partition=2030-01-01",
        "/api/partition?model=no_such_model&partition=2025-01-01",
        "/api/partition?model=daily_revenue",
        "/api/status?model=no_such_model",
        "/etc/passwd",
        "/../../state.db",
    ],
)
def test_what_is_not_there_is_a_json_error(ui: UI, path: str) -> None:
    status, headers, body = ui.get(path)
    assert status == 404 and headers["Content-Type"] == "application/json"
    error = json.loads(body)
    assert error["schema"] == "tidegate.error/v1" and "\n" not in error["error"]


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_it_is_read_only(ui: UI, project: Path, method: str) -> None:
    before = state_dump(project)
    status, headers, _ = ui.request(method, "/api/status")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    for path in (
        "/",
        "/api/view",
        "/api/status",
        f"/api/partition?model={MODEL}&partition=2025-03-02",
    ):
        assert ui.get(path)[0] == 200
    assert state_dump(project) == before


def test_another_host_name_is_refused(ui: UI) -> None:
    # a page elsewhere cannot read the ledger through a DNS name rebound to 127.0.0.1
    status, _, body = ui.get("/api/status", {"Host": "attacker.example:80"})
    assert status == 421 and "unknown host" in body
    port = ui.url.rsplit(":", 1)[1].rstrip("/")
    assert ui.get("/api/status", {"Host": f"localhost:{port}"})[0] == 200


def test_the_view_is_sent_again_only_when_the_ledger_changed(ui: UI, project: Path) -> None:
    status, headers, body = ui.get("/api/view")
    assert status == 200
    tag = headers["ETag"]
    view = json.loads(body)
    assert view["live"] is True and all(m["details"] is None for m in view["models"])
    assert ui.get("/api/view", {"If-None-Match": tag})[0] == 304
    assert tidegate("pause", MODEL, "--reason", "look", "--project", project).exit_code == 0
    try:
        status, headers, body = ui.get("/api/view", {"If-None-Match": tag})
        assert status == 200 and headers["ETag"] != tag
        assert json.loads(body)["events"][0]["reason"] == "look"
    finally:
        assert tidegate("unpause", MODEL, "--project", project).exit_code == 0


def test_a_port_in_use_is_busy(ui: UI, project: Path) -> None:
    port = ui.url.rsplit(":", 1)[1].rstrip("/")
    result = run_process("ui", "--port", port, "--project", project, timeout=60)
    assert result.exit_code == 4, result.stderr
    assert (
        result.stderr == f"error: port {port} on 127.0.0.1 is in use (another tidegate ui?); "
        "pass --port N, or --port 0 for a free one\n"
    )


@pytest.mark.parametrize("port", ["70000", "-1", "http"])
def test_a_bad_port_is_usage(project: Path, port: str) -> None:
    result = tidegate("ui", "--port", port, "--project", project)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr


def test_no_project_is_usage_before_listening(tmp_path: Path) -> None:
    result = tidegate("ui", "--port", "0", "--project", tmp_path)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
