"""Releasing a Flink stream job by savepoint, for real: the example's job on local
MiniClusters, under a supervisor process, through tidegate's own commands."""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path

import pytest

from tests.faults.ledger import wait_until
from tests.flink.kit import (
    COMMAND_TIMEOUT_SECONDS,
    MODEL,
    Supervisor,
    caught_up,
    document,
    environment,
    example,
    flink_python,
    orders_in,
    orders_out,
    running_example,
    tidegate,
    totals,
    use_job,
    validate_with_input,
    wait_caught_up,
    write_orders,
)

pytestmark = [pytest.mark.flink, pytest.mark.xdist_group("flink")]


def events(project: Path) -> list[dict[str, object]]:
    history = document(project, "history", MODEL)
    found: list[dict[str, object]] = history["events"]
    return found


def deploy_in_background(project: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(flink_python()), "-m", "tidegate", "deploy", MODEL, *args, "--project", str(project)],
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_handover(project: Path) -> None:
    """Until the running version has stopped with a savepoint for the next one to start."""

    def handing_over() -> bool | None:
        stream = document(project, "status")["models"][0]["stream"]
        return (stream["version_seq"] == 2 and stream["state"] in ("handover", "starting")) or None

    wait_until("the handover to v2", handing_over, timeout=120)


def test_deploy_hands_over_by_savepoint_and_rolls_back(tmp_path: Path) -> None:
    project = example(tmp_path)
    tidegate(project, "build")
    write_orders(project, 3)
    # a secret of tidegate's in the supervisor's environment (libpq's password variable)
    supervisor = Supervisor(project, env={"PGPASSWORD": "hunter2-not-for-jobs"})
    try:
        first = document(project, "deploy", MODEL)
        assert first["stream"].startswith("took over from nothing"), first
        wait_caught_up(project)
        # the job's processes (the JVM, its Python workers) never got it
        processes = supervisor.descendants()
        assert len(processes) >= 2, processes
        for pid in processes:
            with contextlib.suppress(OSError):
                assert b"hunter2" not in Path(f"/proc/{pid}/environ").read_bytes(), pid
        write_orders(project, 2)
        # a version whose state reads wrong runs without a failure: its rows give it away
        use_job(project, "float_state")
        tidegate(project, "build")
        corrupt = validate_with_input(project)
        assert corrupt.returncode == 1, corrupt.stdout + corrupt.stderr
        assert "differ from v1's" in json.loads(corrupt.stdout)["summary"], corrupt.stdout
        use_job(project, "v2")
        tidegate(project, "build")
        validated = validate_with_input(project)
        assert validated.returncode == 0, validated.stdout + validated.stderr
        gate = json.loads(validated.stdout)
        assert gate["partitions"][0]["rows"] > 0 and "equal v1's" in gate["summary"], gate
        second = document(project, "deploy", MODEL)
        savepoint = second["stream"].removeprefix("took over from ").split(":")[0]
        assert Path(savepoint).is_dir() and (Path(savepoint) / "_metadata").is_file()
        write_orders(project, 2)
        wait_caught_up(project)
        # v2's rows carry the band, and the day totals went on from v1's state
        out = orders_out(project)
        assert {len(r) for r in out} == {5, 6}
        assert max(int(r[4]) for r in out) == max(
            sum(1 for o in orders_in(project) if o[1] == day) for day in {o[1] for o in out}
        )
        refused = tidegate(project, "rollback", MODEL, ok=False)
        assert refused.returncode == 3 and "--approve" in refused.stderr, refused.stderr
        document(project, "rollback", MODEL, "--approve")
        write_orders(project, 1)
        wait_caught_up(project)
        # v2's output was withdrawn and its orders read again by v1: no band left
        assert {len(r) for r in orders_out(project)} == {5}
        stopped = document(project, "stream", "stop", MODEL)
        assert stopped["state"] == "stopped" and stopped["pid"] == supervisor.process.pid
        assert supervisor.process.wait(timeout=60) == 0
    finally:
        assert supervisor.stop() == 0
    status = document(project, "status")
    stream = next(m for m in status["models"] if m["model"] == MODEL)["stream"]
    assert stream["state"] == "stopped" and stream["savepoint"]
    kinds = [e["kind"] for e in events(project)]
    for kind in ("deploy", "stream_start", "savepoint", "takeover", "rollback", "gate"):
        assert kind in kinds, kinds
    assert totals(orders_out(project)) == totals(orders_in(project))


def test_validate_refuses_renamed_uid_and_changed_state(tmp_path: Path) -> None:
    project, supervisor = running_example(tmp_path)
    assert supervisor.stop() == 0
    # events that arrived since the savepoint: the new version reads the state for them
    write_orders(project, 1)
    for job, said in (
        ("renamed_uid", "Cannot map checkpoint/savepoint state"),
        ("state_type", "UnicodeDecodeError"),
    ):
        use_job(project, job)
        tidegate(project, "build")
        done = tidegate(project, "validate", MODEL, "--json", ok=False)
        assert done.returncode == 1, (job, done.stdout)
        assert said in json.loads(done.stdout)["summary"], done.stdout
    refused = tidegate(project, "deploy", MODEL, ok=False)
    assert refused.returncode == 3 and "failed" in refused.stderr
    # a stream has no partitions to compute: refused before anything is written
    runs = len(document(project, "history", MODEL)["events"])
    for command in (
        ("backfill", MODEL, "--partitions", "all"),
        ("rerun", MODEL, "--partitions", "all"),
        ("run", MODEL),
    ):
        done = tidegate(project, *command, ok=False)
        assert done.returncode == 2 and "is a stream model" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert len(document(project, "history", MODEL)["events"]) == runs
    tick = tidegate(project, "run")
    assert "a stream, run by its supervisor" in tick.stdout + tick.stderr


def test_a_crash_looping_version_is_rolled_back_by_the_deploy(tmp_path: Path) -> None:
    project, supervisor = running_example(tmp_path)
    try:
        use_job(project, "crash")
        tidegate(project, "build")
        deploying = deploy_in_background(project, "--force", "--reason", "crash")
        # an order that arrives as v2 starts: v2 fails on it, again and again
        wait_for_handover(project)
        write_orders(project, 1)
        _, err = deploying.communicate(timeout=COMMAND_TIMEOUT_SECONDS)
        assert deploying.returncode == 1, err
        assert "did not take over" in err and "v1 runs again" in err, err
        assert "cannot parse" in err, err
        state = document(project, "status")
        stream = next(m for m in state["models"] if m["model"] == MODEL)
        assert stream["active_version"]["seq"] == 1 and stream["stream"]["state"] == "running"
        write_orders(project, 1)
        wait_caught_up(project)
        # a pause stops the job with a savepoint; the orders of the pause wait for the unpause
        paused = document(project, "pause", MODEL)
        assert paused["stream"].startswith("stopped with savepoint"), paused
        write_orders(project, 1)
        assert not caught_up(project)
        unpaused = document(project, "unpause", MODEL)
        assert unpaused["stream"] == f"runs again from {paused['stream'].split()[-1]}", unpaused
        wait_caught_up(project)
    finally:
        assert supervisor.stop() == 0


@pytest.mark.crash
def test_sigkill_of_the_supervisor_during_a_deploy(tmp_path: Path) -> None:
    project, supervisor = running_example(tmp_path)
    use_job(project, "v2")
    tidegate(project, "build")
    assert validate_with_input(project).returncode == 0
    deploying = deploy_in_background(project)
    wait_for_handover(project)
    supervisor.kill()
    _, err = deploying.communicate(timeout=60)
    assert deploying.returncode == 1 and "stopped before v2 took over" in err, err
    stream = document(project, "status")["models"][0]["stream"]
    assert stream["supervised"] is False
    assert stream["version_seq"] == 2 and stream["restore_point"], stream
    write_orders(project, 1)
    again = Supervisor(project)
    try:

        def resumed() -> dict[str, object] | None:
            found: dict[str, object] = document(project, "status")["models"][0]["stream"]
            return found if found["state"] != "starting" else None

        stream = wait_until("v2 confirmed again", resumed, timeout=120)
        assert stream["state"] == "running" and stream["version_seq"] == 2, stream
        wait_caught_up(project)
    finally:
        assert again.stop() == 0
    assert totals(orders_out(project)) == totals(orders_in(project))
