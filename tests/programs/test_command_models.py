"""Command models: an external job writes Parquet, tidegate audits and publishes it. A job that
fails, times out or writes rows failing a check leaves the published partition untouched; the
job is recorded per attempt with its secrets masked."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import pytest

from tests.faults.backfill_kit import running
from tests.kit import example_project, spawn, state_dump, tidegate
from tests.ops.test_json_schemas import validator
from tests.programs.kit import (
    add_command_model,
    daily_oracle,
    deploy,
    document,
    published,
    run,
)

DAY = "2025-03-05"
SECRET = "s3cr3t-value-never-recorded"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The command model `revenue_job` deployed, and DAY published by it."""
    project = example_project(tmp_path / "shop", rows_per_day=3)
    add_command_model(project, "revenue_job", "compute()\n")
    deploy(project, "revenue_job")
    run(project, "run", "revenue_job", "--partition", DAY)
    assert published(project, "revenue_job") == daily_oracle(project, DAY, DAY)
    return project


def replace_job(project: Path, job: str, timeout_seconds: float = 120) -> None:
    """Deploy a new version of `revenue_job` whose job does `job`."""
    add_command_model(project, "revenue_job", job, timeout_seconds)
    deploy(project, "revenue_job", force=True)


def failed_reason(project: Path) -> str:
    done = document(project, "run", "revenue_job", "--partition", DAY, code=1)
    [partition] = done["partitions"]
    assert partition["state"] == "failed"
    return str(partition["reason"])


def staging_left(project: Path) -> list[Path]:
    return list((project / ".tidegate" / "staging").glob("*"))


def test_a_job_computes_what_is_published_and_is_recorded_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = example_project(tmp_path / "shop", rows_per_day=3)
    monkeypatch.setenv("REVENUE_SECRET", SECRET)
    add_command_model(
        project,
        "revenue_job",
        # the job sees the real values; the record only masked ones
        'import os\nassert os.environ["API_TOKEN"] == "plain"\n'
        f'assert os.environ["UPSTREAM_PASSWORD"] == "{SECRET}"\n'
        'assert os.environ["TIDEGATE_START"] == ARGS["--start"]\n'
        "compute()\n",
        env='API_TOKEN = "plain"\nUPSTREAM_PASSWORD = "${REVENUE_SECRET}"\nREGION = "eu"',
    )
    deploy(project, "revenue_job")
    done = document(project, "run", "revenue_job", "--partition", "2025-03-01..2025-03-07")
    assert done["status"] == "succeeded"
    assert published(project, "revenue_job") == daily_oracle(project, "2025-03-01", "2025-03-07")
    shown = document(project, "show", "run", done["run_id"])
    validator("run").validate(shown)
    job = shown["attempts"][0]["command"]
    assert job["exit_code"] == 0 and job["pid"] > 0 and job["ended_at"] is not None
    assert job["environment"]["API_TOKEN"] == "***"  # by its name
    assert job["environment"]["UPSTREAM_PASSWORD"] == "***"  # by its reference
    assert job["environment"]["REGION"] == "eu"
    assert job["environment"]["TIDEGATE_START"] == "2025-03-01T00:00:00+00:00"
    assert job["environment"]["TIDEGATE_END"] == "2025-03-02T00:00:00+00:00"
    assert job["command"][1:4] == ["jobs/revenue_job.py", "--start", "2025-03-01T00:00:00+00:00"]
    assert SECRET not in repr(state_dump(project))
    text = run(project, "show", "run", done["run_id"]).stdout
    assert "exit 0 after" in text and "API_TOKEN=***" in text and SECRET not in text
    assert staging_left(project) == []


def test_a_job_gets_a_minimal_environment(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH, HOME, the locale, TZ and TMPDIR of tidegate's environment, tidegate's own variables
    for the partition, the model's env and what it passes through; nothing else of tidegate's,
    and never a variable holding one of its secrets."""
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text()
        + '\n[[notify]]\nname = "hook"\nkind = "http"\nurl = "https://hooks.example/x"\n'
        'token_env = "HOOK_TOKEN"\n'
    )
    monkeypatch.setenv("HOOK_TOKEN", SECRET)
    monkeypatch.setenv("PGPASSWORD", SECRET)
    monkeypatch.setenv("TIDEGATE_TEST_STRAY", "stray")
    monkeypatch.setenv("AWS_PROFILE", "etl")
    seen = project / "job-environment.json"
    path = add_command_model(
        project,
        "revenue_job",
        f"import json, os\nPath({str(seen)!r}).write_text(json.dumps(dict(os.environ)))\n"
        "compute()\n",
    )
    text = path.read_text().replace(
        "timeout_seconds = 120",
        'timeout_seconds = 120\nenv_passthrough = ["AWS_PROFILE", "UNSET_X"]',
    )
    path.write_text(text)
    deploy(project, "revenue_job", force=True)
    run(project, "run", "revenue_job", "--partition", DAY)
    environment = json.loads(seen.read_text())
    own = {f"TIDEGATE_{n}" for n in ("START", "END", "OUTPUT", "INPUTS", "MODEL", "PYTHON")}
    base = {"PATH", "HOME", "LANG", "TZ", "TMPDIR"}
    assert own <= set(environment)
    assert environment["AWS_PROFILE"] == "etl" and environment["REVENUE_CURRENCY"] == "EUR"
    left = set(environment) - own - base - {"AWS_PROFILE", "REVENUE_CURRENCY"}
    assert {name for name in left if not name.startswith("LC_")} == set(), left
    assert environment["PATH"] == os.environ["PATH"]
    assert SECRET not in seen.read_text()


def test_what_a_job_prints_of_a_secret_is_masked_wherever_it_is_kept(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job gets the secret the model declares; what it prints of it is *** in the reason,
    the command record and every output (the password tidegate connects with, PGPASSWORD here,
    too, should the job know it some other way)."""
    monkeypatch.setenv("REVENUE_SECRET", SECRET)
    monkeypatch.setenv("PGPASSWORD", "pg-" + SECRET)
    add_command_model(
        project,
        "revenue_job",
        "import os\n"
        "print('x' * 5000, file=sys.stderr)\n"
        "print('login with', os.environ['UPSTREAM_PASSWORD'], file=sys.stderr)\n"
        f"print('pg', {('pg-' + SECRET)[::-1]!r}[::-1], 'failed', file=sys.stderr)\n"
        "sys.exit(2)\n",
        env='UPSTREAM_PASSWORD = "${REVENUE_SECRET}"',
    )
    deploy(project, "revenue_job", force=True)
    done = document(project, "run", "revenue_job", "--partition", DAY, code=1)
    [partition] = done["partitions"]
    assert partition["reason"] == (
        "command exited with code 2: its output was discarded (pg *** failed)"
    )
    human = run(project, "run", "revenue_job", "--partition", DAY, code=1)
    shown = document(project, "show", "run", done["run_id"])
    job = shown["attempts"][0]["command"]
    assert "login with ***\npg *** failed" in job["stderr_tail"]
    texts = [
        json.dumps(done),
        human.stdout + human.stderr,
        json.dumps(shown),
        run(project, "show", "run", done["run_id"]).stdout,
        json.dumps(document(project, "show", "partition", "revenue_job", DAY)),
        repr(state_dump(project)),
    ]
    assert [SECRET in text for text in texts] == [False] * len(texts)


def test_a_version_built_before_its_variable_became_a_secret_does_not_run(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader refuses a model file that hands a secret to its job; a version runs as it was
    built, so the job is refused again when it would start."""
    monkeypatch.setenv("HOOK_TOKEN", SECRET)
    path = add_command_model(project, "revenue_job", "compute()\n")
    path.write_text(
        path.read_text().replace(
            "timeout_seconds = 120", 'timeout_seconds = 120\nenv_passthrough = ["HOOK_TOKEN"]'
        )
    )
    deploy(project, "revenue_job", force=True)
    # the model file no longer passes it through, but the active version does
    add_command_model(project, "revenue_job", "compute()\n")
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text()
        + '\n[[notify]]\nname = "hook"\nkind = "http"\nurl = "https://hooks.example/x"\n'
        'token_env = "HOOK_TOKEN"\n'
    )
    assert failed_reason(project) == (
        "env_passthrough: HOOK_TOKEN is the token_env of [[notify]] hook: tidegate never gives "
        "its secrets to a job"
    )
    assert staging_left(project) == []


def test_a_job_that_exits_non_zero_midway_publishes_nothing(project: Path) -> None:
    before = published(project, "revenue_job")
    # a complete-looking output, then a crash: none of it may be published
    replace_job(project, "compute()\nprint('lost the connection', file=sys.stderr)\nsys.exit(3)\n")
    reason = failed_reason(project)
    assert "command exited with code 3" in reason and "lost the connection" in reason
    assert published(project, "revenue_job") == before
    assert staging_left(project) == []


def test_a_job_writing_rows_that_fail_a_check_publishes_nothing(project: Path) -> None:
    before = published(project, "revenue_job")
    replace_job(
        project,
        "compute()\n"
        "import duckdb\n"
        "out = str(OUTPUT / 'daily_revenue.parquet')\n"
        "con = duckdb.connect()\n"
        "rows = con.sql('SELECT * REPLACE (net_revenue - 1 AS gross_revenue) "
        "FROM read_parquet($p)', params={'p': out}).to_arrow_table()\n"
        "import pyarrow.parquet as pq\n"
        "pq.write_table(rows, out)\n",
    )
    reason = failed_reason(project)
    assert "check net_not_above_gross failed" in reason
    assert published(project, "revenue_job") == before


def test_a_job_writing_something_else_than_parquet_publishes_nothing(project: Path) -> None:
    before = published(project, "revenue_job")
    replace_job(project, "(OUTPUT / 'part-0.parquet').write_text('order_date,status\\n')\n")
    assert "output is not Parquet of the declared columns" in failed_reason(project)
    assert published(project, "revenue_job") == before


def test_a_job_past_its_timeout_is_killed_and_publishes_nothing(project: Path) -> None:
    before = published(project, "revenue_job")
    pid_file = project / "job.pid"
    replace_job(
        project,
        "import os, threading\n"
        "compute()\n"
        f"Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
        "threading.Event().wait()\n",
        timeout_seconds=1,
    )
    reason = failed_reason(project)
    assert "command timed out after 1 s" in reason
    assert published(project, "revenue_job") == before
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
    assert staging_left(project) == []


def test_a_missing_environment_reference_fails_the_attempt(project: Path) -> None:
    add_command_model(
        project, "revenue_job", "compute()\n", env='TOKEN = "${TIDEGATE_TEST_UNSET_VARIABLE}"'
    )
    deploy(project, "revenue_job", force=True)
    assert "${TIDEGATE_TEST_UNSET_VARIABLE} is not set" in failed_reason(project)


def blocking_job(
    project: Path, monkeypatch: pytest.MonkeyPatch, when: str, first: str = "pass"
) -> socket.socket:
    """Deploy a `revenue_job` whose job, `when` its condition holds, does `first`, writes a
    complete output, tells the test its process id over the socket returned, and waits there
    until it is killed; otherwise it computes as usual."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(120)
    add_command_model(
        project,
        "revenue_job",
        "import os, socket\n"
        f"if {when}:\n"
        f"    {first}\n"
        "    compute()  # a complete output, never to be published\n"
        "    with socket.create_connection(('127.0.0.1', int(os.environ['TEST_PORT']))) as s:\n"
        "        s.sendall(str(os.getpid()).encode())\n"
        "        s.recv(1)  # until it is killed\n"
        "    sys.exit(9)\n"
        "compute()\n",
        env='TEST_PORT = "${TEST_PORT}"',
    )
    deploy(project, "revenue_job", force=True)
    # the model's env reads TEST_PORT from tidegate's environment (a resume's too)
    monkeypatch.setenv("TEST_PORT", str(listener.getsockname()[1]))
    return listener


@pytest.mark.crash
def test_a_second_ctrl_c_kills_the_running_job_and_publishes_nothing(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = published(project, "revenue_job")
    listener = blocking_job(project, monkeypatch, "True")
    with running("backfill", "revenue_job", "--partitions", DAY, "--project", project) as backfill:
        try:
            job, _ = listener.accept()
        finally:
            listener.close()
        with job:
            job.settimeout(120)
            assert int(job.recv(32)) > 0  # the job runs, and said so
            backfill.send_signal(signal.SIGINT)  # the first: the batch in flight may finish
            backfill.wait_for_stdout("stopping after in-flight batches", 60)
            backfill.send_signal(signal.SIGINT)  # the second: abort it, and its job
            assert job.recv(1) == b""  # the job's end of the socket closed: it was killed
        result = backfill.finish(60)
    assert result.exit_code == 130, result.stderr
    assert published(project, "revenue_job") == before


@pytest.mark.crash
def test_a_sigkill_of_tidegate_while_the_job_runs_is_recovered_by_resume(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job of the third day tells the test it runs (over a socket), then waits; the test
    kills tidegate with SIGKILL and resumes the backfill, which stops the job left running and
    runs the day again."""
    marker = project / "killed-once"
    listener = blocking_job(
        project,
        monkeypatch,
        f"ARGS['--start'].startswith('2025-01-03') and not Path({str(marker)!r}).exists()",
        f"Path({str(marker)!r}).touch()",
    )
    days = ("--partitions", "2025-01-01..2025-01-06", "--batch-size", "1")
    backfill = spawn("backfill", "revenue_job", *days, "--project", project)
    try:
        job, _ = listener.accept()  # the third day's job is running
        orphan = int(job.recv(32))
    finally:
        backfill.kill()
        backfill.communicate()
        listener.close()
    assert backfill.returncode == -9

    [listed] = document(project, "backfill", "list")["runs"]
    shown = document(project, "show", "run", listed["run_id"])
    [killed] = [a["command"] for a in shown["attempts"] if a["partition"] == "2025-01-03"]
    assert killed["pid"] == orphan
    assert killed["exit_code"] is None and killed["ended_at"] is None  # running as tidegate died
    published_before = daily_oracle(project, "2025-01-01", "2025-01-02")
    assert published(project, "revenue_job") == published_before + daily_oracle(project, DAY, DAY)
    assert staging_left(project) != []  # the killed run's folder, with the job's output

    with job:
        job.settimeout(120)
        resumed = tidegate("backfill", "resume", listed["run_id"], "--project", project, "--json")
        # the resume stopped the job tidegate left running: its end of the socket is closed
        assert job.recv(1) == b""
    assert resumed.exit_code == 0, resumed.stdout[-3000:]
    expected = daily_oracle(project, "2025-01-01", "2025-01-06") + daily_oracle(project, DAY, DAY)
    assert published(project, "revenue_job") == sorted(expected)
    assert staging_left(project) == []
    [stopped] = [
        a["command"]
        for a in document(project, "show", "run", listed["run_id"])["attempts"]
        if a["command"] and a["command"]["pid"] == orphan
    ]
    assert stopped["exit_code"] is None and stopped["ended_at"] is not None


def test_a_new_command_version_passes_its_gate(project: Path) -> None:
    add_command_model(project, "revenue_job", "compute()  # v2\n")
    run(project, "build")
    gate = document(project, "validate", "revenue_job", "--partitions", DAY)
    assert gate["passed"] and gate["partitions"][0]["state"] == "passed"
    assert staging_left(project) == []


def test_a_job_that_prints_its_error_on_stdout_keeps_it_in_the_reason_and_the_record(
    project: Path,
) -> None:
    add_command_model(
        project,
        "revenue_job",
        "print('Runtime Error: Table with name raw_orders does not exist')\nsys.exit(1)\n",
    )
    deploy(project, "revenue_job", force=True)
    done = document(project, "run", "revenue_job", "--partition", DAY, code=1)
    [partition] = done["partitions"]
    assert partition["reason"].endswith(
        "(Runtime Error: Table with name raw_orders does not exist)"
    )
    job = document(project, "show", "run", done["run_id"])["attempts"][0]["command"]
    assert "raw_orders does not exist" in job["stderr_tail"]
