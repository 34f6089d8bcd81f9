"""The pure part of stream models (domain/stream.py): the judgment of a takeover, the
supervisor's next step, the output a restore point makes stale, the declaration's round trip;
and the folders a stream keeps (flink/places.py), and the one line a Flink failure comes down
to (flink/rest.py). No Flink runs here."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.state.contract import spec as model_spec
from tests.state.contract import version as model_version
from tests.state.stream_contract import STARTING
from tidegate.domain.errors import ModelError
from tidegate.domain.model import ModelKind, Program, Version
from tidegate.domain.stream import (
    JobStatus,
    Observation,
    Step,
    StreamOutput,
    StreamRecord,
    StreamSpec,
    StreamState,
    compare_rows,
    judge_takeover,
    newer_output,
    next_step,
    stream_from_config,
)
from tidegate.flink import places
from tidegate.flink.rest import root_cause
from tidegate.project.code_files import digest
from tidegate.project.python_model import code_files

OUTPUT = StreamOutput(
    path="out/orders_per_day", format="csv", columns=("order_id", "day", "amount")
)
SPEC = StreamSpec(
    job="jobs/orders_per_day.py:build",
    checkpoints="state/orders_per_day",
    parallelism=1,
    env=(),
    output=OUTPUT,
    flink_version="2.3.0",
    confirm_checkpoints=2,
    confirm_timeout_seconds=120.0,
)


def seen(
    status: JobStatus = JobStatus.RUNNING,
    restarts: int = 0,
    checkpoints: int = 0,
    elapsed: float = 1.0,
) -> Observation:
    return Observation(
        status=status, restarts=restarts, checkpoints=checkpoints, elapsed_seconds=elapsed
    )


# judge_takeover


def test_running_with_the_checkpoints_asked_for_and_no_restart_is_a_takeover() -> None:
    found = judge_takeover(seen(checkpoints=2), SPEC)
    assert found is not None and found.confirmed
    assert "2 checkpoint(s)" in found.reason
    more = judge_takeover(seen(checkpoints=7), SPEC)
    assert more is not None and more.confirmed


def test_fewer_checkpoints_than_asked_for_is_undecided_before_the_timeout() -> None:
    assert judge_takeover(seen(checkpoints=1), SPEC) is None
    assert judge_takeover(seen(checkpoints=0, elapsed=119.9), SPEC) is None
    asks_five = replace(SPEC, confirm_checkpoints=5)
    assert judge_takeover(seen(checkpoints=4), asks_five) is None
    found = judge_takeover(seen(checkpoints=5), asks_five)
    assert found is not None and found.confirmed


@pytest.mark.parametrize("status", [JobStatus.INITIALIZING, JobStatus.CREATED])
def test_a_job_not_yet_running_is_not_confirmed_whatever_it_counts(status: JobStatus) -> None:
    assert judge_takeover(seen(status, checkpoints=9), SPEC) is None


def test_a_restart_refuses_even_with_checkpoints_completed() -> None:
    found = judge_takeover(seen(restarts=1, checkpoints=10), SPEC)
    assert found is not None and not found.confirmed
    assert "restarted 1 time(s)" in found.reason
    twice = judge_takeover(seen(restarts=3, checkpoints=10), SPEC)
    assert twice is not None and not twice.confirmed and "restarted 3 time(s)" in twice.reason


@pytest.mark.parametrize("status", [JobStatus.RESTARTING, JobStatus.FAILING])
def test_restarting_or_failing_refuses_even_before_a_restart_is_counted(
    status: JobStatus,
) -> None:
    found = judge_takeover(seen(status, restarts=0, checkpoints=10), SPEC)
    assert found is not None and not found.confirmed
    assert "restarted 1 time(s)" in found.reason


@pytest.mark.parametrize("status", [JobStatus.FAILED, JobStatus.CANCELED, JobStatus.FINISHED])
def test_an_ended_job_refuses(status: JobStatus) -> None:
    found = judge_takeover(seen(status, checkpoints=10), SPEC)
    assert found is not None and not found.confirmed
    assert found.reason == f"the job {status.value.lower()} as it started"


def test_no_confirmation_within_the_timeout_refuses_naming_it() -> None:
    short = replace(SPEC, confirm_timeout_seconds=30.0)
    assert judge_takeover(seen(checkpoints=1, elapsed=29.9), short) is None
    found = judge_takeover(seen(checkpoints=1, elapsed=30.0), short)
    assert found is not None and not found.confirmed
    assert "not confirmed within 30s" in found.reason
    assert "1 of 2 checkpoint(s)" in found.reason
    assert "RUNNING" in found.reason
    starting = judge_takeover(seen(JobStatus.INITIALIZING, elapsed=31.0), short)
    assert starting is not None and not starting.confirmed
    assert "not confirmed within 30s (INITIALIZING" in starting.reason


@given(
    status=st.sampled_from(JobStatus),
    restarts=st.integers(0, 5),
    checkpoints=st.integers(0, 10),
    elapsed=st.floats(0, 300, allow_nan=False),
    wanted=st.integers(1, 5),
    timeout=st.floats(1, 200, allow_nan=False),
)
def test_a_takeover_is_confirmed_only_when_running_checkpointing_and_never_restarted(
    status: JobStatus,
    restarts: int,
    checkpoints: int,
    elapsed: float,
    wanted: int,
    timeout: float,
) -> None:
    spec = replace(SPEC, confirm_checkpoints=wanted, confirm_timeout_seconds=timeout)
    found = judge_takeover(seen(status, restarts, checkpoints, elapsed), spec)
    troubled = restarts > 0 or status in (JobStatus.RESTARTING, JobStatus.FAILING)
    good = status is JobStatus.RUNNING and checkpoints >= wanted and not troubled
    if good:
        assert found is not None and found.confirmed
    elif status.ended or troubled or elapsed >= timeout:
        assert found is not None and not found.confirmed
    else:
        assert found is None


# next_step: every combination of what runs, what the ledger asks, and whether it is paused

NEXT_STEPS = [
    # running, active, paused -> step
    (None, None, False, Step.WATCH),
    (None, None, True, Step.WATCH),
    (None, "v1", False, Step.START),
    (None, "v1", True, Step.WATCH),
    ("v1", None, False, Step.WATCH),
    ("v1", None, True, Step.STOP),
    ("v1", "v1", False, Step.WATCH),
    ("v1", "v1", True, Step.STOP),
    ("v1", "v2", False, Step.HANDOVER),
    ("v1", "v2", True, Step.STOP),
]


@pytest.mark.parametrize(("running", "active", "paused", "step"), NEXT_STEPS)
def test_the_supervisors_next_step(
    running: str | None, active: str | None, paused: bool, step: Step
) -> None:
    assert next_step(running, active, paused) is step


@given(
    running=st.sampled_from([None, "v1", "v2"]),
    active=st.sampled_from([None, "v1", "v2"]),
    paused=st.booleans(),
)
def test_next_step_starts_only_what_is_not_running_and_stops_only_what_is(
    running: str | None, active: str | None, paused: bool
) -> None:
    step = next_step(running, active, paused)
    assert (step is Step.START) == (running is None and active is not None and not paused)
    assert (step is Step.STOP) == (running is not None and paused)
    assert (step is Step.HANDOVER) == (
        running is not None and active is not None and active != running and not paused
    )


# newer_output


def test_newer_output_is_what_was_committed_after_the_restore_point_sorted() -> None:
    kept = ["day=1/orders-0.csv", "day=1/orders-1.csv"]
    now = ["day=2/orders-0.csv", "day=1/orders-1.csv", "day=1/orders-0.csv", "a.csv"]
    assert newer_output(kept, now) == ["a.csv", "day=2/orders-0.csv"]
    assert newer_output(kept, kept) == []
    # a file gone since (withdrawn before) is not newer output
    assert newer_output(kept, ["day=1/orders-0.csv"]) == []
    assert newer_output([], iter(["b", "a"])) == ["a", "b"]


# the declaration


@given(
    job=st.sampled_from(["jobs/a.py:build", "x.py:main", "deep/er/mod.py:_f"]),
    checkpoints=st.sampled_from(["state/a", "/abs/state"]),
    parallelism=st.integers(1, 64),
    env=st.lists(st.sampled_from(["LAKE_TOKEN", "A", "B_2"]), unique=True).map(tuple),
    columns=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, unique=True).map(tuple),
    idempotent=st.booleans(),
    interval=st.integers(1, 60_000),
    confirm=st.integers(1, 10),
    timeout=st.floats(0.5, 1000, allow_nan=False),
    restarts=st.integers(0, 10),
)
def test_a_declaration_survives_its_config_and_json(
    job: str,
    checkpoints: str,
    parallelism: int,
    env: tuple[str, ...],
    columns: tuple[str, ...],
    idempotent: bool,
    interval: int,
    confirm: int,
    timeout: float,
    restarts: int,
) -> None:
    spec = StreamSpec(
        job=job,
        checkpoints=checkpoints,
        parallelism=parallelism,
        env=env,
        output=StreamOutput("out/x", "csv", columns, idempotent),
        flink_version="2.3.0",
        checkpoint_interval_ms=interval,
        confirm_checkpoints=confirm,
        confirm_timeout_seconds=timeout,
        restart_attempts=restarts,
    )
    assert stream_from_config(spec.config()) == spec
    assert stream_from_config(json.loads(json.dumps(spec.config()))) == spec


def test_the_job_is_split_at_its_last_colon() -> None:
    assert (SPEC.job_file, SPEC.job_function) == ("jobs/orders_per_day.py", "build")
    windows = replace(SPEC, job="C:/jobs/orders.py:run")
    assert (windows.job_file, windows.job_function) == ("C:/jobs/orders.py", "run")


# places: the stream's folders


def write(path: Path, text: str = "x\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_committed_output_skips_hidden_files_and_folders(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write(out / "orders-0.csv")
    write(out / "2025-01-01--00" / "orders-1.csv")
    write(out / ".orders-2.csv.inprogress.abc")
    write(out / "2025-01-01--00" / ".orders-3.csv.inprogress")
    write(out / ".staging" / "orders-4.csv")
    write(out / "a" / ".hidden" / "b" / "orders-5.csv")
    (out / "empty-folder").mkdir()
    assert places.committed_output(out) == ["2025-01-01--00/orders-1.csv", "orders-0.csv"]
    assert places.committed_output(tmp_path / "missing") == []


def test_committed_output_does_not_mind_a_hidden_folder_above_the_output(tmp_path: Path) -> None:
    out = tmp_path / ".tidegate" / "shadow" / "out"
    write(out / "orders-0.csv")
    assert places.committed_output(out) == ["orders-0.csv"]


def test_a_manifest_kept_beside_a_savepoint_is_read_back(tmp_path: Path) -> None:
    savepoint = tmp_path / "savepoint-abc"
    savepoint.mkdir()
    assert places.manifest_of(str(savepoint)) is None
    places.keep_manifest(str(savepoint), ["b/orders-1.csv", "orders-0.csv"])
    assert places.manifest_of(str(savepoint)) == ["b/orders-1.csv", "orders-0.csv"]
    places.keep_manifest(str(savepoint), [])
    assert places.manifest_of(str(savepoint)) == []
    assert places.manifest_of(str(tmp_path / "no-such-savepoint")) is None


def test_the_newest_checkpoint_is_the_highest_completed_one(tmp_path: Path) -> None:
    job = tmp_path / "job-1"
    write(job / "chk-3" / "_metadata")
    write(job / "chk-10" / "_metadata")  # 10 > 3 as numbers, not as text
    (job / "chk-12").mkdir()  # not completed: no _metadata
    write(job / "chk-latest" / "_metadata")
    write(job / "chk-" / "_metadata")
    write(job / "shared" / "_metadata")
    assert places.newest_checkpoint(tmp_path, "job-1") == str(job / "chk-10")
    assert places.newest_checkpoint(tmp_path, "job-2") is None
    write(tmp_path / "job-3" / "chk-1" / "other")
    assert places.newest_checkpoint(tmp_path, "job-3") is None


def test_withdrawn_files_keep_their_relative_paths(tmp_path: Path) -> None:
    out, into = tmp_path / "out", tmp_path / "withdrawn"
    write(out / "orders-0.csv", "a\n")
    write(out / "day=2" / "orders-1.csv", "b\n")
    write(out / "orders-2.csv", "c\n")
    places.withdraw(out, ["orders-0.csv", "day=2/orders-1.csv"], into)
    assert places.committed_output(out) == ["orders-2.csv"]
    assert places.committed_output(into) == ["day=2/orders-1.csv", "orders-0.csv"]
    assert (into / "day=2" / "orders-1.csv").read_text() == "b\n"
    assert (into / "orders-0.csv").read_text() == "a\n"


def test_rows_are_the_non_empty_lines_of_the_files_named(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write(out / "a.csv", "1,x\n\n2,y\n   \n3,z")  # the last line has no newline
    write(out / "b" / "c.csv", "4,w\n")
    write(out / "d.csv", "")
    write(out / "not-counted.csv", "5,v\n6,u\n")
    assert places.count_rows(out, ["a.csv", "b/c.csv", "d.csv"]) == 4
    assert places.count_rows(out, []) == 0


def test_module_plain_path_and_located() -> None:
    assert places.module_of("jobs/orders_per_day.py") == "jobs.orders_per_day"
    assert places.module_of("orders.py") == "orders"
    assert places.module_of("a/b/c.py") == "a.b.c"
    assert places.plain_path("file:/tmp/state/chk-3") == "/tmp/state/chk-3"
    assert places.plain_path("file:///tmp/state/chk-3") == "/tmp/state/chk-3"
    assert places.plain_path("/tmp/state/chk-3") == "/tmp/state/chk-3"
    root = Path("/project")
    assert places.located(root, "state/x") == Path("/project/state/x")
    assert places.located(root, "/elsewhere/x") == Path("/elsewhere/x")


# places.code_of: a version runs the code it was built from

JOB = "from jobs.helpers import parse\n\n\ndef build(env, output):\n    return parse\n"
HELPERS = "def parse(line):\n    return line.split(',')\n"


def built_version(root: Path, version_id: str, seq: int = 1) -> Version:
    """A Flink version of the job in `root` as its files are now."""
    files = code_files(root, root / "jobs" / "job.py")
    program = Program(kind=ModelKind.FLINK, entry=("jobs/job.py:build",), files=files)
    base = model_version(version_id + "0" * (64 - len(version_id)), seq, model="orders_per_day")
    return replace(base, spec=replace(model_spec("orders_per_day"), program=program))


@pytest.fixture
def job_root(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write(root / "jobs" / "job.py", JOB)
    write(root / "jobs" / "helpers.py", HELPERS)
    return root


def test_a_versions_code_is_copied_from_the_project_with_what_it_imports(job_root: Path) -> None:
    version = built_version(job_root, "c0de01")
    assert [path for path, _ in version.spec.program.files] == [  # type: ignore[union-attr]
        "jobs/helpers.py",
        "jobs/job.py",
    ]
    folder = places.code_of(job_root, version)
    assert folder == job_root.resolve() / ".tidegate" / "code" / version.version_id
    assert (folder / "jobs" / "job.py").read_text() == JOB
    assert (folder / "jobs" / "helpers.py").read_text() == HELPERS


def test_the_copy_is_reused_once_the_project_changed(job_root: Path) -> None:
    version = built_version(job_root, "c0de01")
    folder = places.code_of(job_root, version)
    (job_root / "jobs" / "helpers.py").write_text(HELPERS + "# changed\n")
    assert places.code_of(job_root, version) == folder
    assert (folder / "jobs" / "helpers.py").read_text() == HELPERS


def test_changed_code_with_no_copy_kept_names_the_file(job_root: Path) -> None:
    version = built_version(job_root, "c0de02", seq=3)
    (job_root / "jobs" / "helpers.py").write_text(HELPERS + "# changed\n")
    with pytest.raises(ModelError) as raised:
        places.code_of(job_root, version)
    message = str(raised.value)
    assert "orders_per_day v3's code is gone" in message
    assert "jobs/helpers.py changed since it was built" in message
    assert not (job_root / ".tidegate" / "code" / version.version_id).exists()


def test_a_copy_that_does_not_hold_the_code_is_copied_again(job_root: Path) -> None:
    version = built_version(job_root, "c0de03")
    folder = places.code_of(job_root, version)
    (folder / "jobs" / "job.py").write_text("tampered\n")
    assert places.code_of(job_root, version) == folder
    assert digest(folder / "jobs" / "job.py") == digest(job_root / "jobs" / "job.py")


# rest.root_cause: the one line a failure comes down to

PYTHON_IN_JAVA = """\
org.apache.flink.runtime.JobException: Recovery is suppressed by FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=2, backoffTimeMS=1000)
\tat org.apache.flink.runtime.executiongraph.failover.ExecutionFailureHandler.handleFailure(ExecutionFailureHandler.java:219)
\tat org.apache.flink.runtime.scheduler.DefaultScheduler.recordTaskFailure(DefaultScheduler.java:300)
Caused by: java.lang.RuntimeException: Error received from SDK harness for instruction 4: Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/apache_beam/runners/worker/sdk_worker.py", line 311, in _execute
    response = task()
  File "/project/.tidegate/code/abc/jobs/orders_per_day.py", line 25, in parse
    order_id, day, amount = line.strip().split(",")
ValueError: not enough values to unpack (expected 3, got 1)

\tat org.apache.beam.runners.fnexecution.control.FnApiControlClient$ResponseStreamObserver.onNext(FnApiControlClient.java:180)
\t... 12 more
"""  # noqa: E501

CAUSES_ONLY = """\
org.apache.flink.runtime.JobException: Recovery is suppressed by NoRestartBackoffTimeStrategy
\tat org.apache.flink.runtime.executiongraph.failover.ExecutionFailureHandler.handleFailure(ExecutionFailureHandler.java:219)
Caused by: java.io.IOException: Could not open the input
\tat org.apache.flink.connector.file.src.impl.FileSourceReader.start(FileSourceReader.java:50)
Caused by: java.io.FileNotFoundException: /project/in/orders (No such file or directory)
\tat java.base/java.io.FileInputStream.open0(Native Method)
\t... 9 more
"""  # noqa: E501


def test_a_python_error_inside_a_java_trace_is_the_root_cause() -> None:
    assert root_cause(PYTHON_IN_JAVA) == (
        "ValueError: not enough values to unpack (expected 3, got 1)"
    )


def test_a_py4j_trace_comes_down_to_its_last_cause() -> None:
    # what str() of a Py4JJavaError looks like: its first line is not an exception
    trace = "An error occurred while calling o12.execute.\n: " + CAUSES_ONLY
    assert root_cause(trace) == (
        "java.io.FileNotFoundException: /project/in/orders (No such file or directory)"
    )


def test_a_java_trace_without_python_comes_down_to_its_last_cause() -> None:
    # a job's stack trace as Flink's REST API gives it (latest_exception): it starts with the
    # Java exception itself
    assert root_cause(CAUSES_ONLY) == (
        "java.io.FileNotFoundException: /project/in/orders (No such file or directory)"
    )


def test_otherwise_the_first_line() -> None:
    assert root_cause("\n  the savepoint could not be taken\nsecond line\n") == (
        "the savepoint could not be taken"
    )
    assert root_cause("") == "unknown error"
    assert len(root_cause("x" * 2000)) == 500


# comparing a new version's rows with the running version's, by key
RUNNING_COLUMNS = ("order_id", "day", "amount", "day_total")
NEW_COLUMNS = ("order_id", "day", "amount", "day_total", "band")


def by_key(rows: list[tuple[str, ...]]) -> dict[tuple[str, ...], tuple[str, ...]]:
    return {(row[0],): row for row in rows}


def test_rows_equal_on_the_shared_columns_agree_and_the_new_column_is_not_compared() -> None:
    running = by_key([("o1", "d1", "5", "5"), ("o2", "d1", "7", "12")])
    new = [("o1", "d1", "5", "5", "small"), ("o2", "d1", "7", "12", "small")]
    found = compare_rows(new, NEW_COLUMNS, running, RUNNING_COLUMNS, ("order_id",))
    assert (found.compared, found.unmatched, found.differing) == (2, 0, ())
    assert found.columns == ("day", "amount", "day_total") and found.agrees
    assert found.describe("v1") == "2 row(s) equal v1's on day, amount, day_total"


def test_a_differing_value_is_named_by_key_column_and_both_values() -> None:
    running = by_key([("o1", "d1", "5", "5"), ("o2", "d1", "7", "12")])
    new = [("o1", "d1", "5", "5.0", "small"), ("o2", "d1", "7", "12", "small")]
    found = compare_rows(new, NEW_COLUMNS, running, RUNNING_COLUMNS, ("order_id",))
    assert found.differing == (("o1", "day_total", "5", "5.0"),) and not found.agrees
    assert found.describe("v1").startswith("1 value(s) differ from v1's in 2 row(s) compared")
    assert "o1 day_total: '5' → '5.0'" in found.describe("v1")


def test_rows_the_running_version_has_not_written_are_unmatched_and_nothing_compared_fails() -> (
    None
):
    found = compare_rows(
        [("o9", "d1", "1", "1", "small")], NEW_COLUMNS, {}, RUNNING_COLUMNS, ("order_id",)
    )
    assert (found.compared, found.unmatched) == (0, 1) and not found.agrees
    assert "no row to compare with v1's" in found.describe("v1")


def test_csv_rows_of_another_layout_are_passed_over_and_recent_files_are_found(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.csv").write_text("o1,d1,5,5\no2,d1,7,12,small\n")
    (tmp_path / "old.csv").write_text("o0,d1,1,1\n")
    os.utime(tmp_path / "old.csv", (1_000_000, 1_000_000))
    assert list(places.csv_rows(tmp_path, ["a.csv"], 4)) == [["o1", "d1", "5", "5"]]
    assert places.committed_since(tmp_path, 2_000_000) == ["a.csv"]


# where a stream resumes
def stream_record(state: StreamState, **fields: str) -> StreamRecord:
    return replace(STARTING, state=state, **fields)


def test_a_stream_never_run_starts_from_nothing(tmp_path: Path) -> None:
    assert places.restore_point(None, tmp_path) is None


def test_a_stopped_stream_resumes_from_its_savepoint_not_its_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "job-1" / "chk-9").mkdir(parents=True)
    (tmp_path / "job-1" / "chk-9" / "_metadata").write_text("")
    record = stream_record(StreamState.STOPPED, job_id="job-1", savepoint="/sp/1")
    assert places.restore_point(record, tmp_path) == "/sp/1"


def test_a_dead_streams_newest_checkpoint_on_disk_wins(tmp_path: Path) -> None:
    for number in (3, 12):
        (tmp_path / "job-1" / f"chk-{number}").mkdir(parents=True)
        (tmp_path / "job-1" / f"chk-{number}" / "_metadata").write_text("")
    (tmp_path / "job-1" / "chk-13").mkdir()  # in progress: no _metadata yet
    for state in (StreamState.RUNNING, StreamState.STARTING, StreamState.FAILED):
        record = stream_record(
            state, job_id="job-1", checkpoint="/old/chk-2", savepoint="/sp/1", restored_from="/sp/0"
        )
        assert places.restore_point(record, tmp_path) == str(tmp_path / "job-1" / "chk-12")


def test_without_checkpoints_on_disk_the_recorded_points_are_taken_in_order(
    tmp_path: Path,
) -> None:
    handed = stream_record(StreamState.HANDOVER, savepoint="/sp/1", restored_from="/sp/0")
    assert places.restore_point(handed, tmp_path) == "/sp/1"
    started = stream_record(StreamState.STARTING, job_id="job-2", restored_from="/sp/0")
    assert places.restore_point(started, tmp_path) == "/sp/0"
    recorded = stream_record(StreamState.RUNNING, job_id="job-2", checkpoint="/c/chk-4")
    assert places.restore_point(recorded, tmp_path) == "/c/chk-4"
